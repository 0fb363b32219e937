// The filters, tests, attribute/method lookup and globals that chat templates
// use, with jinja2's (and Python's) behaviour. Each throws ValueError with a
// Python-like message; the evaluator adds the template line and construct.
#pragma once

#include <string>
#include <string_view>

#include "template/value.h"

namespace ferrox::tmpl {

bool is_known_filter(std::string_view name);
bool is_known_test(std::string_view name);
Value call_filter(std::string_view name, const Value& operand, const Args& args);
bool call_test(std::string_view name, const Value& operand, const Args& args);

// `obj.name`: an attribute or bound method first, then the item (jinja2's getattr).
Value get_attribute(const Value& obj, const std::string& name);
// `obj[key]`: the item first, then an attribute (jinja2's getitem).
Value get_item(const Value& obj, const Value& key);
Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

// The names every template sees: range, namespace, dict, raise_exception,
// strftime_now, cycler/joiner are not provided (not used by chat templates).
void add_globals(Dict& globals);

// Iteration as a for loop does it (dict -> keys, string -> characters).
List iterate(const Value& v);

// markupsafe's escape: & < > " ' as entities.
std::string html_escape(const std::string& s);

// Python `in`.
bool contains(const Value& container, const Value& item);

inline constexpr int64_t kMaxRange = 100000;  // jinja2's sandbox limit

}  // namespace ferrox::tmpl
