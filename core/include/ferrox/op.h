// Op names for logs, reports and the capability table.
#pragma once

#include <array>
#include <string_view>

#include "ferrox/backend_abi.h"

namespace ferrox {

inline constexpr std::array<std::string_view, FERROX_OP_COUNT> kOpNames{
    "MATVEC", "GEMM",    "RMS_NORM", "ROPE",    "ATTENTION",    "SWIGLU",     "GEGLU",     "ADD",
    "MUL",    "SOFTMAX", "GET_ROWS", "CONVERT", "ADD_RMS_NORM", "SWIGLU_OAI", "DELTA_NET",
};

constexpr std::string_view op_name(ferrox_op op) {
    return static_cast<size_t>(op) < kOpNames.size() ? kOpNames[op] : std::string_view{"?"};
}

}  // namespace ferrox
