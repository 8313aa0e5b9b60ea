#include "pond/base/printable.h"

namespace pond {

std::string Printable(std::string_view text, size_t shown_max) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < text.size() && i < shown_max; i++) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += {'\\', 'x', kHex[c >> 4], kHex[c & 0xf]};
    }
  }
  if (text.size() > shown_max) out += "...";
  return out;
}

}  // namespace pond
