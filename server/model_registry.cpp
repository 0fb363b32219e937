#include "model_registry.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

#include "ferrox/escape.h"

namespace ferrox::server {

const char* model_state_name(ModelState state) {
    switch (state) {
        case ModelState::Unloaded:
            return "unloaded";
        case ModelState::Loading:
            return "loading";
        case ModelState::Loaded:
            return "loaded";
    }
    return "unloaded";
}

namespace {

constexpr size_t kMaxDurationText = 32;
// Beyond this a keep-alive is "keep": about 68 years, so that no sum overflows.
constexpr double kMaxKeepAliveSeconds = double(int64_t(1) << 31);

ApiError bad_keep_alive(std::string_view why) {
    return ApiError{400,
                    fmt::format("'keep_alive' {}: give seconds (300), a duration (\"5m\", "
                                "\"1h30m\", \"90s\"), 0 to unload at once or a negative "
                                "number to keep the model loaded",
                                why),
                    "keep_alive"};
}

int64_t whole_seconds(double s) {
    if (!std::isfinite(s)) throw bad_keep_alive("is not a finite number");
    if (s < 0) return -1;
    if (s >= kMaxKeepAliveSeconds) return -1;
    return static_cast<int64_t>(std::ceil(s));  // 0.5 s keeps it for a second, not none
}

// Go's time.ParseDuration subset: [-]N[.N]unit..., units ms s m h.
double duration_seconds(std::string_view text) {
    if (text.empty() || text.size() > kMaxDurationText)
        throw bad_keep_alive(fmt::format("must be 1 to {} characters", kMaxDurationText));
    double sign = 1;
    if (text.front() == '-' || text.front() == '+') {
        sign = text.front() == '-' ? -1 : 1;
        text.remove_prefix(1);
    }
    bool digits_only = !text.empty();
    for (char c : text)
        digits_only = digits_only && (std::isdigit(static_cast<unsigned char>(c)) || c == '.');
    double total = 0;
    size_t i = 0;
    while (i < text.size()) {  // each pass takes at least one character
        const size_t start = i;
        while (i < text.size() &&
               (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
            ++i;
        if (i == start)
            throw bad_keep_alive(fmt::format("\"{}\" has no number at offset {}",
                                             escape_text(text, EscapeFor::Line), start));
        const std::string number(text.substr(start, i - start));
        if (std::count(number.begin(), number.end(), '.') > 1)
            throw bad_keep_alive(fmt::format("\"{}\" is not a number", number));
        const double value = std::strtod(number.c_str(), nullptr);
        if (digits_only) return sign * value;  // a bare number string is seconds
        const size_t unit_start = i;
        while (i < text.size() && std::isalpha(static_cast<unsigned char>(text[i]))) ++i;
        const std::string_view unit = text.substr(unit_start, i - unit_start);
        double scale = 0;
        if (unit == "ms")
            scale = 1e-3;
        else if (unit == "s")
            scale = 1;
        else if (unit == "m")
            scale = 60;
        else if (unit == "h")
            scale = 3600;
        else
            throw bad_keep_alive(fmt::format("has the unit \"{}\"; the units are ms, s, m and h",
                                             escape_text(unit, EscapeFor::Line)));
        total += value * scale;
    }
    return sign * total;
}

}  // namespace

int64_t parse_keep_alive(const nlohmann::ordered_json& value) {
    if (value.is_number()) return whole_seconds(value.get<double>());
    if (value.is_string()) return whole_seconds(duration_seconds(value.get<std::string>()));
    throw bad_keep_alive("must be a number or a duration string");
}

ModelRegistry::Lease::Lease(Lease&& o) noexcept
    : registry_(std::exchange(o.registry_, nullptr)),
      index_(o.index_),
      instance_(std::move(o.instance_)) {}

ModelRegistry::Lease::~Lease() {
    if (registry_) registry_->release(index_);
}

void ModelRegistry::Lease::count(uint64_t prompt_tokens, uint64_t generated_tokens) {
    std::lock_guard lock(registry_->m_);
    Entry& e = registry_->entries_[index_];
    e.prompt_tokens += prompt_tokens;
    e.generated_tokens += generated_tokens;
}

const std::string& ModelRegistry::Lease::id() const { return registry_->entries_[index_].spec.id; }

ModelRegistry::ModelRegistry(std::vector<ModelSpec> specs, ModelLoader& loader,
                             RegistryOptions options)
    : loader_(loader), options_(std::move(options)) {
    for (ModelSpec& spec : specs) {
        Entry e;
        e.need = loader_.bytes_needed(spec);
        e.spec = std::move(spec);
        e.default_keep_alive_s = e.spec.keep_alive_s.value_or(options_.keep_alive_s);
        e.keep_alive_s = e.default_keep_alive_s;
        entries_.push_back(std::move(e));
    }
    worker_ = std::thread([this] { work(); });
    if (options_.expire_every.count() > 0) expirer_ = std::thread([this] { expire_loop(); });
}

ModelRegistry::~ModelRegistry() {
    {
        std::lock_guard lock(m_);
        stopping_ = true;
        for (Entry& e : entries_)
            if (e.state == ModelState::Loaded) unload_locked(e);
    }
    work_cv_.notify_all();
    changed_.notify_all();
    if (expirer_.joinable()) expirer_.join();
    worker_.join();  // it runs what was queued (the unloads) before it ends
}

void ModelRegistry::post(std::function<void()> job) {
    jobs_.push_back(std::move(job));
    work_cv_.notify_all();
}

void ModelRegistry::work() {
    std::unique_lock lock(m_);
    for (;;) {
        work_cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
        if (jobs_.empty()) return;  // stopping, and all done
        auto job = std::move(jobs_.front());
        jobs_.pop_front();
        working_ = true;
        lock.unlock();
        job();  // a load or an unload: never under the lock
        lock.lock();
        working_ = false;
        changed_.notify_all();
    }
}

void ModelRegistry::wait_worker_idle() {
    std::unique_lock lock(m_);
    changed_.wait(lock, [&] { return jobs_.empty() && !working_; });
}

void ModelRegistry::expire_loop() {
    std::unique_lock lock(m_);
    while (!stopping_) {
        work_cv_.wait_for(lock, options_.expire_every, [&] { return stopping_; });
        if (stopping_) return;
        lock.unlock();
        expire();
        lock.lock();
    }
}

void ModelRegistry::unload_locked(Entry& e) {
    std::shared_ptr<ModelInstance> instance = std::move(e.instance);
    e.state = ModelState::Unloaded;
    e.bytes = 0;
    e.expires.reset();
    ++e.unloads;
    // The last reference may be a lease's; the registry's goes on the worker.
    post([instance = std::move(instance)]() mutable { instance.reset(); });
}

std::optional<ApiError> ModelRegistry::make_room_locked(Entry& e) {
    uint64_t used = 0;
    for (const Entry& other : entries_) used += other.bytes;
    const uint64_t budget = options_.budget_bytes;
    const auto free_bytes = [&] { return used >= budget ? 0 : budget - used; };
    if (e.need <= free_bytes()) return std::nullopt;
    // Idle loaded models, least recently used first.
    std::vector<Entry*> idle;
    uint64_t idle_bytes = 0;
    for (Entry& other : entries_)
        if (other.state == ModelState::Loaded && other.in_flight == 0) {
            idle.push_back(&other);
            idle_bytes += other.bytes;
        }
    if (e.need > budget || e.need > free_bytes() + idle_bytes) {
        std::string held;
        for (const Entry& other : entries_) {
            if (other.state == ModelState::Unloaded) continue;
            held += fmt::format("{}'{}' ({} bytes, {}, {} in flight)", held.empty() ? "" : "; ",
                                escape_text(other.spec.id, EscapeFor::Line), other.bytes,
                                model_state_name(other.state), other.in_flight);
        }
        return ApiError{
            503,
            fmt::format("no room for model '{}': it needs {} bytes and {} of the {}-byte budget "
                        "(server.models_memory) are free, {} more in idle models; held: {}",
                        escape_text(e.spec.id, EscapeFor::Line), e.need, free_bytes(), budget,
                        idle_bytes, held.empty() ? "nothing" : held),
            "model"};
    }
    std::sort(idle.begin(), idle.end(),
              [](const Entry* a, const Entry* b) { return a->last_used < b->last_used; });
    for (Entry* victim : idle) {  // bounded by the models
        if (e.need <= free_bytes()) break;
        used -= victim->bytes;
        unload_locked(*victim);
    }
    return std::nullopt;
}

ModelRegistry::Acquired ModelRegistry::acquire(std::string_view id,
                                               std::optional<int64_t> keep_alive_s,
                                               Clock::time_point deadline) {
    std::unique_lock lock(m_);
    const auto it = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) {
        return e.spec.id == id ||
               std::find(e.spec.aliases.begin(), e.spec.aliases.end(), id) != e.spec.aliases.end();
    });
    if (it == entries_.end())
        return {std::nullopt,
                {404,
                 fmt::format("the model '{}' does not exist; GET /v1/models lists the models "
                             "served",
                             escape_text(id, EscapeFor::Line)),
                 "model"}};
    const size_t index = static_cast<size_t>(it - entries_.begin());
    // Each pass either returns, waits, or starts a load; a model evicted
    // between its load and this wake-up is loaded again (at most a few times).
    for (int pass = 0; pass < 8; ++pass) {
        Entry& e = entries_[index];
        if (draining_ || stopping_) return {std::nullopt, {503, "the server is shutting down", ""}};
        if (e.state == ModelState::Loaded) {
            ++e.in_flight;
            ++e.requests;
            e.keep_alive_s = keep_alive_s.value_or(e.default_keep_alive_s);
            e.last_used = options_.now();
            e.expires.reset();
            return {Lease(this, index, e.instance), {0, "", ""}};
        }
        if (e.state == ModelState::Loading) {
            const uint64_t waiting_for = e.attempts;
            changed_.wait_until(lock, deadline, [&] { return e.state != ModelState::Loading; });
            if (e.state == ModelState::Loading)
                return {std::nullopt,
                        {503,
                         fmt::format("the model '{}' is still loading",
                                     escape_text(e.spec.id, EscapeFor::Line)),
                         ""}};
            if (e.state == ModelState::Unloaded && e.attempts == waiting_for &&
                !e.load_error.empty())
                return {std::nullopt,
                        {500,
                         fmt::format("the model '{}' failed to load: {}",
                                     escape_text(e.spec.id, EscapeFor::Line), e.load_error),
                         ""}};
            continue;
        }
        if (auto refused = make_room_locked(e)) return {std::nullopt, std::move(*refused)};
        e.state = ModelState::Loading;
        e.bytes = e.need;
        e.load_error.clear();
        ++e.attempts;
        post([this, index] {
            Entry* entry;
            ModelSpec spec;
            {
                std::lock_guard guard(m_);
                entry = &entries_[index];
                spec = entry->spec;
            }
            auto loaded = loader_.load(spec);
            std::lock_guard guard(m_);
            if (loaded) {
                entry->instance = std::shared_ptr<ModelInstance>(std::move(*loaded));
                entry->bytes = entry->instance->bytes();
                entry->need = entry->bytes;  // its next load is counted at what it took
                entry->state = ModelState::Loaded;
                ++entry->loads;
                entry->last_used = options_.now();
                // Expires even if the request that asked for it has gone.
                if (entry->keep_alive_s >= 0)
                    entry->expires = entry->last_used + std::chrono::seconds(entry->keep_alive_s);
                if (stopping_) unload_locked(*entry);
            } else {
                entry->state = ModelState::Unloaded;
                entry->bytes = 0;
                entry->load_error = loaded.error().message();
                ++entry->load_failures;
            }
        });
    }
    return {std::nullopt,
            {503,
             fmt::format("the model '{}' was unloaded again while it was being loaded",
                         escape_text(id, EscapeFor::Line)),
             ""}};
}

void ModelRegistry::release(size_t index) {
    std::lock_guard lock(m_);
    Entry& e = entries_[index];
    --e.in_flight;
    e.last_used = options_.now();
    if (e.in_flight > 0 || e.state != ModelState::Loaded) return;
    if (e.keep_alive_s == 0)
        unload_locked(e);
    else if (e.keep_alive_s > 0)
        e.expires = e.last_used + std::chrono::seconds(e.keep_alive_s);
    else
        e.expires.reset();
}

void ModelRegistry::expire() {
    std::lock_guard lock(m_);
    const Clock::time_point now = options_.now();
    for (Entry& e : entries_)
        if (e.state == ModelState::Loaded && e.in_flight == 0 && e.expires && now >= *e.expires)
            unload_locked(e);
}

std::vector<ModelStatus> ModelRegistry::list() const {
    std::lock_guard lock(m_);
    std::vector<ModelStatus> out;
    for (const Entry& e : entries_) {
        out.push_back({e.spec.id, e.state, e.bytes, e.in_flight});
        for (const std::string& alias : e.spec.aliases)
            out.push_back({alias, e.state, e.bytes, e.in_flight});
    }
    return out;
}

namespace {

// A label value in the text exposition format: \\, \" and \n escaped.
std::string label_value(std::string_view v) {
    std::string out;
    for (char c : v) {
        if (c == '\\' || c == '"')
            out += {'\\', c};
        else if (c == '\n')
            out += "\\n";
        else
            out += c;
    }
    return out;
}

}  // namespace

std::string ModelRegistry::render_metrics() const {
    // A gauge of a loaded model's scheduler; 0 for a model without one.
    using GaugeOf = double (*)(const LoadGauges&);
    struct Series {
        const char* name;
        const char* type;
        const char* help;
        uint64_t Entry::*value;  // null: `gauge`, or the loaded gauge
        GaugeOf gauge = nullptr;
    };
    static constexpr Series kSeries[] = {
        {"ferrox:model_requests_total", "counter", "Requests a model was loaded for and served.",
         &Entry::requests},
        {"ferrox:model_prompt_tokens_total", "counter", "Prompt tokens of a model's requests.",
         &Entry::prompt_tokens},
        {"ferrox:model_generation_tokens_total", "counter", "Tokens a model generated.",
         &Entry::generated_tokens},
        {"ferrox:model_loads_total", "counter", "Loads of a model that succeeded.", &Entry::loads},
        {"ferrox:model_load_failures_total", "counter", "Loads of a model that failed.",
         &Entry::load_failures},
        {"ferrox:model_unloads_total", "counter",
         "Unloads of a model: its keep-alive ran out, another model needed the room, or the "
         "server stopped.",
         &Entry::unloads},
        {"ferrox:model_loaded", "gauge", "1 while a model is loaded, else 0.", nullptr},
        {"ferrox:model_num_requests_running", "gauge",
         "A model's requests holding a sequence (prefill or decode).", nullptr,
         [](const LoadGauges& g) { return double(g.running.load()); }},
        {"ferrox:model_num_requests_waiting", "gauge",
         "A model's requests admitted and waiting for a sequence.", nullptr,
         [](const LoadGauges& g) { return double(g.waiting.load()); }},
        {"ferrox:model_kv_cache_usage_perc", "gauge",
         "Fraction of a model's KV-cache cells in use, 0..1.", nullptr,
         [](const LoadGauges& g) {
             return double(g.kv_used.load()) / double(std::max<uint32_t>(1, g.kv_total.load()));
         }},
    };
    std::lock_guard lock(m_);
    std::string out;
    for (const Series& series : kSeries) {
        out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", series.name, series.help, series.name,
                           series.type);
        for (const Entry& e : entries_) {
            const std::string label = label_value(e.spec.id);
            if (series.gauge) {
                const LoadGauges* g = e.instance ? e.instance->gauges() : nullptr;
                out += fmt::format("{}{{model=\"{}\"}} {}\n", series.name, label,
                                   g ? series.gauge(*g) : 0.0);
                continue;
            }
            out += fmt::format(
                "{}{{model=\"{}\"}} {}\n", series.name, label,
                series.value ? e.*series.value : uint64_t(e.state == ModelState::Loaded));
        }
    }
    return out;
}

LoadTotals ModelRegistry::load_totals() const {
    std::lock_guard lock(m_);
    LoadTotals t;
    for (const Entry& e : entries_) {
        const LoadGauges* g = e.instance ? e.instance->gauges() : nullptr;
        if (!g) continue;
        t.running += g->running.load();
        t.waiting += g->waiting.load();
        t.kv_used += g->kv_used.load();
        t.kv_total += g->kv_total.load();
    }
    return t;
}

bool ModelRegistry::drain(Clock::time_point deadline) {
    std::vector<std::shared_ptr<ModelInstance>> loaded;
    {
        std::lock_guard lock(m_);
        draining_ = true;
        for (Entry& e : entries_)
            if (e.instance) loaded.push_back(e.instance);
    }
    changed_.notify_all();
    for (auto& instance : loaded) instance->begin_drain();
    bool all = true;
    for (auto& instance : loaded) all = instance->wait_idle(deadline) && all;
    return all;
}

}  // namespace ferrox::server
