#!/usr/bin/env bash
# Uses Pond as someone outside this tree would: installs the build into a fresh prefix, checks
# that the installed headers and CMake package stand alone, then configures a tiny project that
# does find_package(pond REQUIRED) against nothing but that prefix, builds the examples with it
# and runs them. Removes everything it made.
# Usage: install_test.sh CMAKE BUILD_DIR SOURCE_DIR "EXAMPLE..."
set -euo pipefail
cmake="$1" build="$2" src="$3" examples="$4"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pond-install-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"

"$cmake" --install "$build" --prefix "$prefix" >"$tmp/install.log"

# Every header a public header includes with quotes is installed too.
for h in "$prefix"/include/pond/*.h; do
  for inc in $(sed -n 's/^#include "\(.*\)"$/\1/p' "$h"); do
    if [ ! -f "$prefix/include/$inc" ]; then
      echo "FAIL: ${h#"$prefix"/} includes $inc, which is not installed"
      exit 1
    fi
  done
done
# The package may not point back at the tree it was built from.
package_dir=$(dirname "$(find "$prefix" -name pondConfig.cmake)")
if grep -l -e "$src" -e "$build" "$package_dir"/*.cmake; then
  echo "FAIL: the installed CMake package names the source or build tree (files above)"
  exit 1
fi

mkdir "$tmp/user"
for e in $examples; do cp "$src/examples/$e.cc" "$tmp/user/"; done
{
  echo 'cmake_minimum_required(VERSION 3.25)'
  echo 'project(pond_user LANGUAGES CXX)'
  echo 'find_package(pond 0.1 REQUIRED)'
  for e in $examples; do
    echo "add_executable($e $e.cc)"
    echo "target_compile_options($e PRIVATE -Wall -Wextra -Werror)"
    # Pond's headers must be warning-free too, not hidden behind -isystem.
    echo "set_target_properties($e PROPERTIES NO_SYSTEM_FROM_IMPORTED ON)"
    echo "target_link_libraries($e PRIVATE pond::pond)"
  done
} >"$tmp/user/CMakeLists.txt"
# Nothing but the prefix: no hint of this tree, and C++20 comes from pond::pond.
"$cmake" -S "$tmp/user" -B "$tmp/user/build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release >"$tmp/configure.log" 2>&1 || { cat "$tmp/configure.log"; exit 1; }
"$cmake" --build "$tmp/user/build" -j 2 >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; exit 1; }
for e in $examples; do
  echo "== $e"
  "$tmp/user/build/$e"
done
echo "ok: installed into a temporary prefix, found with find_package(pond), examples built and ran"
