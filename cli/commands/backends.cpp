// `ferrox backends`: every plugin file found, its state and why, its devices,
// and its capability table -- what an operator needs to see in one command.
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "commands/commands.h"
#include "ferrox/cpu_features.h"
#include "ferrox/dispatch.h"
#include "ferrox/log.h"
#include "ferrox/model/resident_ops.h"
#include "ferrox/op.h"
#include "ferrox/quant_kind.h"
#include "format.h"
#include "output.h"

namespace ferrox::cli {
namespace {

constexpr ferrox_op kTableOps[] = {FERROX_OP_MATVEC, FERROX_OP_GEMM};

struct Capability {
    std::string kernel;     // the backend's kernel, or
    std::string fallback;   // what it runs itself instead, or
    std::string by_design;  // why it leaves the op to another backend
};

// One backend's own answer, read through the dispatcher's plan so this table
// cannot drift from what dispatch decides.
Capability capability(const std::shared_ptr<Backend>& b, ferrox_op op, ferrox_kind kind) {
    KernelRegistry unused;
    const Plan plan = Dispatcher({b}, unused).plan(op, kind);
    const PlanStep& step = plan.steps.front();
    if (step.outcome == Outcome::Hit) return {step.detail, {}, {}};
    if (step.outcome == Outcome::ByDesign) return {{}, {}, step.detail};
    return {{}, plan.runner ? step.detail : std::string(), {}};
}

// The resident-decoding ops (ABI 1.2) are model::resident_element_ops(): what
// the resident steps record, so this table lists what a pass issues (besides
// weight products and GET_ROWS, listed per weight kind). ADD_RMS_NORM is
// optional: without it a pass issues the residual ADD and the RMS_NORM apart.

// The kernel a resident pass on `b` would run for (op, kind), or "".
std::string resident_kernel(const std::shared_ptr<Backend>& b, ferrox_op op, ferrox_kind kind) {
    KernelRegistry unused;
    const Plan plan = Dispatcher({b}, unused).plan_resident(op, kind);
    return plan.runner && plan.steps.front().outcome == Outcome::Hit ? plan.steps.front().detail
                                                                     : std::string();
}

// Weight kinds whose rows a resident pass can look up (token embeddings).
std::vector<std::string> get_rows_kinds(const std::shared_ptr<Backend>& b) {
    std::vector<std::string> kinds;
    for (const auto& k : kAllKinds)
        if (!resident_kernel(b, FERROX_OP_GET_ROWS, k.id).empty()) kinds.emplace_back(k.name);
    return kinds;
}

std::string abi_string(uint32_t v) {
    return v ? fmt::format("{}.{}", FERROX_ABI_MAJOR(v), FERROX_ABI_MINOR(v)) : std::string("-");
}

// The options a plugin declares (ABI 1.6), as the core checks its section against them.
nlohmann::json declared_options_json(const PluginRecord& r) {
    static constexpr const char* kKindNames[] = {"integer", "bytes", "choice", "bool", "text"};
    nlohmann::json out = nlohmann::json::array();
    for (const OptionSpec& spec : r.options) {
        nlohmann::json o{{"key", spec.key},
                         {"kind", kKindNames[static_cast<size_t>(spec.kind)]},
                         {"help", spec.help}};
        if (spec.kind == FERROX_OPTION_INTEGER || spec.kind == FERROX_OPTION_BYTES)
            o["range"] = {spec.min, spec.max};
        if (spec.kind == FERROX_OPTION_CHOICE) o["choices"] = spec.choices;
        o["default"] = spec.default_value ? nlohmann::json(*spec.default_value) : nlohmann::json();
        out.push_back(std::move(o));
    }
    return out;
}

nlohmann::json to_json(const Session& s) {
    nlohmann::json doc;
    doc["ferrox_version"] = FERROX_VERSION;
    doc["abi_version"] = abi_string(FERROX_ABI_VERSION);
    doc["config"] = s.config.source;
    doc["cpu_features"] = cpu_features().summary();
    doc["backend_order"] = s.config.backend_order;
    doc["search_path"] = nlohmann::json::array();
    for (const auto& d : s.plugins.search_dirs())
        doc["search_path"].push_back({{"path", d.path.string()}, {"origin", d.origin}});
    doc["backends"] = nlohmann::json::array();
    for (const auto& r : s.plugins.records()) {
        nlohmann::json b{{"name", r.name},
                         {"path", r.path.string()},
                         {"found_in", r.found_in},
                         {"state", state_name(r.state)},
                         {"reason", r.reason},
                         {"metadata", r.metadata_source},
                         {"required", r.required},
                         {"abi_version", abi_string(r.abi_version)},
                         {"version", r.version},
                         {"isa_required", r.isa_required},
                         {"driver_libraries", r.driver_libraries}};
        b["options"] = declared_options_json(r);
        b["devices"] = nlohmann::json::array();
        for (const auto& d : r.devices)
            b["devices"].push_back({{"type", d.type == FERROX_DEVICE_GPU ? "gpu" : "cpu"},
                                    {"name", d.name},
                                    {"memory_total", d.memory_total},
                                    {"memory_free", d.memory_free}});
        if (r.backend) {
            nlohmann::json caps;
            for (ferrox_op op : kTableOps)
                for (const auto& k : kAllKinds) {
                    const Capability c = capability(r.backend, op, k.id);
                    nlohmann::json& cell = caps[std::string(op_name(op))][std::string(k.name)];
                    cell = nlohmann::json::object();
                    if (!c.kernel.empty()) cell["kernel"] = c.kernel;
                    if (!c.fallback.empty()) cell["fallback"] = c.fallback;
                    if (!c.by_design.empty()) cell["by_design"] = c.by_design;
                }
            for (ferrox_kind kv : model::kKvCacheKinds) {  // keyed by the KV cache's kind
                const Capability c = capability(r.backend, FERROX_OP_ATTENTION, kv);
                nlohmann::json& cell = caps["ATTENTION"][std::string(kind_name(kv))];
                cell = nlohmann::json::object();
                if (!c.kernel.empty()) cell["kernel"] = c.kernel;
                if (!c.by_design.empty()) cell["by_design"] = c.by_design;
            }
            b["capabilities"] = caps;
            nlohmann::json resident{{"supported", r.backend->has_resident()}};
            if (r.backend->has_resident()) {
                for (const auto& [op, kind] : model::resident_element_ops()) {
                    const std::string kernel = resident_kernel(r.backend, op, kind);
                    resident["ops"][std::string(op_name(op))][std::string(kind_name(kind))] =
                        kernel.empty() ? nlohmann::json(nullptr) : nlohmann::json(kernel);
                }
                resident["get_rows_kinds"] = get_rows_kinds(r.backend);
                resident["many_sequences"] = r.backend->has_attention_cells();
                resident["abi"] = r.backend->abi_version_text();
            }
            b["resident"] = std::move(resident);
        }
        doc["backends"].push_back(std::move(b));
    }
    return doc;
}

void print_text(const Session& s) {
    std::cout << fmt::format("ferrox {} (plugin ABI {}), config: {}\n", FERROX_VERSION,
                             abi_string(FERROX_ABI_VERSION), shown(s.config.source));
    std::cout << fmt::format("backends.order: [{}]   cpu features: {}\n\n",
                             fmt::join(s.config.backend_order, ", "), cpu_features().summary());
    std::cout << "plugin search path:\n";
    for (size_t i = 0; i < s.plugins.search_dirs().size(); ++i) {
        const auto& d = s.plugins.search_dirs()[i];
        std::cout << fmt::format("  {}. {} ({})\n", i + 1, shown(d.path.string()), d.origin);
    }
    std::cout << "\n";

    std::vector<std::vector<std::string>> rows{{"BACKEND", "STATE", "ABI", "PATH", "REASON"}};
    for (const auto& r : s.plugins.records())
        rows.push_back({r.name + (r.required ? " (required)" : ""),
                        std::string(state_name(r.state)), abi_string(r.abi_version),
                        r.path.empty() ? "-" : r.path.string(), r.reason});
    std::cout << render_table(rows);

    for (const auto& r : s.plugins.records()) {
        if (!r.backend) continue;
        std::cout << fmt::format("\n{}: devices\n", r.name);
        for (size_t i = 0; i < r.devices.size(); ++i) {
            const auto& d = r.devices[i];
            std::cout << fmt::format("  [{}] {} {}: {} total, {} free\n", i,
                                     d.type == FERROX_DEVICE_GPU ? "gpu" : "cpu", shown(d.name),
                                     human_bytes(d.memory_total), human_bytes(d.memory_free));
        }
        std::cout << fmt::format("{}: capabilities (kernel, or (fallback) it runs instead, or -)\n",
                                 r.name);
        std::vector<std::vector<std::string>> caps{{"  KIND", "MATVEC", "GEMM"}};
        for (const auto& k : kAllKinds) {
            std::vector<std::string> row{"  " + std::string(k.name)};
            for (ferrox_op op : kTableOps) {
                const Capability c = capability(r.backend, op, k.id);
                row.push_back(!c.kernel.empty()      ? c.kernel
                              : !c.fallback.empty()  ? "(" + c.fallback + ")"
                              : !c.by_design.empty() ? "- by design: " + c.by_design
                                                     : "-");
            }
            caps.push_back(std::move(row));
        }
        std::cout << render_table(caps);
        for (ferrox_kind kv : model::kKvCacheKinds) {
            const Capability c = capability(r.backend, FERROX_OP_ATTENTION, kv);
            std::cout << fmt::format("  ATTENTION ({} KV cache): {}\n", kind_name(kv),
                                     !c.kernel.empty() ? c.kernel
                                     : !c.by_design.empty()
                                         ? "- by design: " + c.by_design
                                         : fmt::format("- ({})", Dispatcher::kHostAttention));
        }
        if (!r.backend->has_resident()) {
            std::cout << "  resident decoding (ABI 1.2): no -- activations stay in host memory\n";
            continue;
        }
        std::cout << "  resident decoding (ABI 1.2): yes -- a model whose every op is listed "
                     "runs wholly in this backend's memory\n";
        std::vector<std::vector<std::string>> ops{{"  OP", "KIND", "KERNEL"}};
        for (const auto& [op, kind] : model::resident_element_ops()) {
            const std::string kernel = resident_kernel(r.backend, op, kind);
            ops.push_back({"  " + std::string(op_name(op)), std::string(kind_name(kind)),
                           kernel.empty() ? "-" : kernel});
        }
        std::cout << render_table(ops);
        std::cout << fmt::format("  GET_ROWS (token embeddings): {}\n",
                                 fmt::join(get_rows_kinds(r.backend), ", "));
        std::cout << (r.backend->has_attention_cells()
                          ? std::string("  many sequences per context (ABI 1.3): yes\n")
                          : fmt::format("  many sequences per context (ABI 1.3): no -- the plugin "
                                        "is ABI {}: one sequence per resident context\n",
                                        r.backend->abi_version_text()));
    }
}

}  // namespace

Command add_backends_command(CLI::App& app, CommonOptions& common) {
    auto* cmd = app.add_subcommand(
        "backends", "List plugin files found, their state, devices and capability tables");
    auto json = std::make_shared<bool>(false);
    cmd->add_flag("--json", *json, "Print one JSON object (key 'backends') instead of tables");
    return {cmd, [json, &common]() -> int {
                auto session = open_session(common);
                if (!session) {
                    logger().error("{}", session.error().message());
                    return kExitBadInput;
                }
                if (*json)
                    print_json(to_json(*session));
                else
                    print_text(*session);
                const auto failed = session->plugins.required_failures();
                for (const PluginRecord* r : failed)
                    logger().error("required backend '{}' is {}: {}", r->name, state_name(r->state),
                                   r->reason);
                return failed.empty() ? kExitOk : kExitFailure;
            }};
}

}  // namespace ferrox::cli
