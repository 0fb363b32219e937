// A zeroed ferrox_call_status of the current size, for tests of ferrox.h.
#pragma once

#include <cstring>

#include "ferrox/ferrox.h"

namespace ferrox::test {

inline ferrox_call_status fresh_status() {
    ferrox_call_status st;
    std::memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    return st;
}

}  // namespace ferrox::test
