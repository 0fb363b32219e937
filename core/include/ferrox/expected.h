// Expected<T>: a value or an Error carrying a human message. The core's one
// error type; the CLI turns it into a message and an exit code once, at the edge.
// (Our own because <expected> needs C++23 and the fuzz build's clang 14 lacks it.)
#pragma once

#include <fmt/format.h>

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace ferrox {

class Error {
  public:
    explicit Error(std::string message) : message_(std::move(message)) {}
    const std::string& message() const { return message_; }

  private:
    std::string message_;
};

// Error(fmt::format(...)) in one call.
template <class... Args>
Error make_error(fmt::format_string<Args...> format, Args&&... args) {
    return Error(fmt::format(format, std::forward<Args>(args)...));
}

template <class T>
class [[nodiscard]] Expected {
  public:
    Expected(T value) : state_(std::in_place_index<0>, std::move(value)) {}
    Expected(Error error) : state_(std::in_place_index<1>, std::move(error)) {}

    bool has_value() const { return state_.index() == 0; }
    explicit operator bool() const { return has_value(); }

    T& value() & {
        assert(has_value());
        return std::get<0>(state_);
    }
    const T& value() const& {
        assert(has_value());
        return std::get<0>(state_);
    }
    T&& value() && {
        assert(has_value());
        return std::get<0>(std::move(state_));
    }
    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }

    const Error& error() const {
        assert(!has_value());
        return std::get<1>(state_);
    }

  private:
    std::variant<T, Error> state_;
};

template <>
class [[nodiscard]] Expected<void> {
  public:
    Expected() = default;
    Expected(Error error) : error_(std::move(error)), failed_(true) {}

    bool has_value() const { return !failed_; }
    explicit operator bool() const { return has_value(); }
    const Error& error() const {
        assert(failed_);
        return error_;
    }

  private:
    Error error_{std::string()};
    bool failed_ = false;
};

}  // namespace ferrox
