#include "options.h"

#include <charconv>
#include <limits>
#include <string_view>

namespace ferrox::cuda {
namespace {

// A whole-string unsigned decimal, or nullopt.
std::optional<uint64_t> parse_unsigned(std::string_view text) {
    uint64_t value = 0;
    const char* end = text.data() + text.size();
    const auto [stop, error] = std::from_chars(text.data(), end, value);
    if (text.empty() || error != std::errc{} || stop != end) return std::nullopt;
    return value;
}

constexpr ferrox_option_spec kDeclaredOptions[] = {
    {"device", FERROX_OPTION_INTEGER, 0, 63, nullptr, "0",
     "CUDA device index, numbered as `nvidia-smi` numbers them."},
    {"vram_budget", FERROX_OPTION_BYTES, 0, std::numeric_limits<int64_t>::max(), nullptr, "0",
     "VRAM ferrox may use; `0` = all free memory. A plain integer is bytes; a size takes an IEC "
     "unit: `B`, `KiB`, `MiB`, `GiB`, `TiB` (case-insensitive, optional space: `512MiB`, "
     "`\"8 GiB\"`). Decimal units (`8GB`) are refused as ambiguous, with the IEC spelling "
     "suggested."},
};

}  // namespace

std::span<const ferrox_option_spec> declared_options() { return kDeclaredOptions; }

Expected<CudaOptions> parse_options(std::span<const ferrox_option> options) {
    CudaOptions parsed;
    for (size_t i = 0; i < options.size(); ++i) {
        const ferrox_option& option = options[i];
        if (option.key == nullptr || option.value == nullptr)
            return make_error("cuda: option #{} has a null key or value", i);
        const std::string_view key = option.key;
        const std::string_view value = option.value;
        if (key == "device") {
            const auto device = parse_unsigned(value);
            if (!device || *device > static_cast<uint64_t>(std::numeric_limits<int>::max()))
                return make_error("cuda: option device='{}' is not a device number (0, 1, ...)",
                                  value);
            parsed.device = static_cast<int>(*device);
        } else if (key == "vram_budget") {
            const auto budget = parse_unsigned(value);
            if (!budget)
                return make_error("cuda: option vram_budget='{}' is not a number of bytes", value);
            parsed.vram_budget = *budget;
        } else {
            parsed.unknown_keys.emplace_back(key);
        }
    }
    return parsed;
}

}  // namespace ferrox::cuda
