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

int exit_status(hub::PullFailure why) {
    switch (why) {
        case hub::PullFailure::NotFound:
        case hub::PullFailure::Unauthorized:
        case hub::PullFailure::Store:
            return kExitBadInput;
        case hub::PullFailure::None:
        case hub::PullFailure::Remote:
        case hub::PullFailure::Network:
        case hub::PullFailure::Mismatch:
        case hub::PullFailure::BadModel:
        case hub::PullFailure::Busy:
        case hub::PullFailure::Io:
            break;
    }
    return kExitFailure;
}

}  // namespace ferrox::cli
