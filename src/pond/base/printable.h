// Text from outside (a name a client sent, an item of a flag's value) made fit for a one-line
// message: at most `shown_max` characters, anything outside printable ASCII — newlines, control
// bytes, invalid UTF-8 — and the quote and backslash as \xNN, and "..." when cut.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace pond {

std::string Printable(std::string_view text, size_t shown_max = 64);

}  // namespace pond
