# cmake -DDOC=docs/api.md -DEXAMPLES="a.cc;b.cc" -P doc_examples.cmake: fails unless DOC shows
# every example file verbatim as a ```cpp block, so that the code a reader copies from the docs
# is the code the tests build and run. To change an example, edit the file and paste it over its
# block in the doc.
file(READ "${DOC}" doc)
foreach(example IN LISTS EXAMPLES)
  file(READ "${example}" code)
  string(FIND "${doc}" "```cpp\n${code}```\n" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${DOC} does not show ${example} verbatim in a ```cpp block: "
                        "paste the file over its block")
  endif()
endforeach()
