#include "exit_status.h"

namespace ferrox::cli {

int exit_status(OpenFailure why) {
    switch (why) {
        case OpenFailure::Backend:
            return kExitFailure;
        case OpenFailure::None:
        case OpenFailure::Io:
        case OpenFailure::BadModel:
        case OpenFailure::Cancelled:
            break;
    }
    return kExitBadInput;
}

int exit_status_of_load(ferrox_code code) {
    return code == FERROX_CODE_BACKEND ? kExitFailure : kExitBadInput;
}

}  // namespace ferrox::cli
