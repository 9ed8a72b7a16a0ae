// Slurm host-list expressions: "gpu-a[01-16,20]", "n[1-3]-ib", "gb-r129-[01-16]",
// "r[1-2]-n[01-02]", "a1,b[2-3]". Pure.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace faultline::common {

// Expands an expression into host names in Slurm's order. On a malformed expression returns
// nullopt and sets *error (if given). Zero padding follows the width of the range's start.
// Refuses expansions over `max_hosts` (a typo like [1-99999999] must not eat memory).
std::optional<std::vector<std::string>> expandHostlist(std::string_view expr, std::string* error = nullptr,
                                                       size_t max_hosts = 1 << 20);

}  // namespace faultline::common
