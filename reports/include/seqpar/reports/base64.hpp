// Base64 (RFC 4648, with padding) for embedding PNG files in the self-contained HTML report.
#pragma once
#include <string>
#include <string_view>

namespace seqpar::reports {

std::string base64_encode(std::string_view bytes);

}  // namespace seqpar::reports
