// What build produced this binary, for benchmark headers: numbers from an assert-enabled build
// are not comparable with Release numbers, and every report says which it was.
#pragma once

namespace pond::bench {

#ifdef POND_BUILD_TYPE
inline constexpr const char* kBuildType = POND_BUILD_TYPE;
#else
inline constexpr const char* kBuildType = "unknown";
#endif

#ifdef NDEBUG
inline constexpr bool kAssertsOn = false;
#else
inline constexpr bool kAssertsOn = true;
#endif

}  // namespace pond::bench
