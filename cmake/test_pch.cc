// The translation unit that compiles the tests' precompiled header (CMakeLists.txt: pond_test_pch).
