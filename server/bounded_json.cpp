#include "bounded_json.h"

#include <fmt/format.h>

#include <unordered_set>
#include <utility>
#include <vector>

#include "ferrox/seeded_hash.h"

namespace ferrox::server {

using nlohmann::ordered_json;

namespace {

// Builds the value as nlohmann's SAX reader reports it, refusing what
// crosses a limit as soon as it does (nothing past it is kept).
class BoundedBuilder {
  public:
    using number_integer_t = ordered_json::number_integer_t;
    using number_unsigned_t = ordered_json::number_unsigned_t;
    using number_float_t = ordered_json::number_float_t;
    using string_t = ordered_json::string_t;
    using binary_t = ordered_json::binary_t;

    explicit BoundedBuilder(const JsonLimits& limits) : limits_(limits) {}

    bool null() { return add(nullptr); }
    bool boolean(bool v) { return add(v); }
    bool number_integer(number_integer_t v) { return add(v); }
    bool number_unsigned(number_unsigned_t v) { return add(v); }
    bool number_float(number_float_t v, const string_t&) { return add(v); }
    bool string(string_t& v) { return add(std::move(v)); }
    bool binary(binary_t&) { return refuse("binary values are not JSON"); }
    bool start_object(size_t) {
        if (!add(ordered_json::object())) return false;
        return open();
    }
    bool key(string_t& k) {
        Frame& f = stack_.back();
        if (!f.keys.insert(k).second)
            return refuse(
                fmt::format("the key '{}' appears twice in the object at '{}'", k, pointer()));
        if (f.keys.size() > limits_.max_object_members)
            return refuse(fmt::format("the object at '{}' has more than {} members", pointer(),
                                      limits_.max_object_members));
        f.key = std::move(k);
        return true;
    }
    bool end_object() {
        stack_.pop_back();
        return true;
    }
    bool start_array(size_t) {
        if (!add(ordered_json::array())) return false;
        return open();
    }
    bool end_array() {
        stack_.pop_back();
        return true;
    }
    bool parse_error(size_t position, const std::string&, const nlohmann::detail::exception& e) {
        if (error_.empty())
            error_ = fmt::format("malformed JSON at byte {}: {}", position, e.what());
        return false;
    }

    ordered_json result;
    std::string error_;

  private:
    struct Frame {
        ordered_json* container;
        std::string key;  // objects: the member being read
        std::unordered_set<std::string, SeededHash, std::equal_to<>> keys;
    };

    // Puts `v` where the reader is; `last_` points at it, for open().
    bool add(ordered_json v) {
        if (++values_ > limits_.max_values)
            return refuse(
                fmt::format("the body holds more than {} JSON values", limits_.max_values));
        if (stack_.empty()) {
            result = std::move(v);
            last_ = &result;
            return true;
        }
        ordered_json& c = *stack_.back().container;
        if (c.is_array()) {
            auto& a = c.get_ref<ordered_json::array_t&>();
            a.push_back(std::move(v));
            last_ = &a.back();
        } else {
            // The key was checked against the object's others: append without
            // ordered_map's linear search for it.
            auto& o = c.get_ref<ordered_json::object_t&>();
            using Members = ordered_json::object_t::Container;
            static_cast<Members&>(o).emplace_back(std::move(stack_.back().key), std::move(v));
            last_ = &o.back().second;
        }
        return true;
    }
    bool open() {
        if (stack_.size() >= limits_.max_depth)
            return refuse(fmt::format("JSON nested deeper than {} levels", limits_.max_depth));
        stack_.push_back({last_, {}, {}});
        return true;
    }
    bool refuse(std::string why) {
        error_ = std::move(why);
        return false;
    }
    // Where the reader is, as a JSON pointer.
    std::string pointer() const {
        std::string p;
        for (size_t i = 0; i + 1 < stack_.size(); ++i) {
            const ordered_json& c = *stack_[i].container;
            // The child being read is the container's last element.
            p += "/" + (c.is_array() ? std::to_string(c.size() - 1)
                                     : c.get_ref<const ordered_json::object_t&>().back().first);
        }
        return p.empty() ? "/" : p;
    }

    const JsonLimits& limits_;
    std::vector<Frame> stack_;
    ordered_json* last_ = nullptr;
    size_t values_ = 0;
};

}  // namespace

Expected<ordered_json> parse_bounded_json(std::string_view text, const JsonLimits& limits) {
    BoundedBuilder builder(limits);
    const bool ok = ordered_json::sax_parse(text.begin(), text.end(), &builder);
    if (!ok || !builder.error_.empty())
        return make_error("{}", builder.error_.empty() ? "malformed JSON" : builder.error_);
    return std::move(builder.result);
}

}  // namespace ferrox::server
