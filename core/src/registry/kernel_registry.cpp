#include "ferrox/kernel_registry.h"

#include <fmt/format.h>

#include <filesystem>

#include "ferrox/op.h"
#include "ferrox/quant_kind.h"

namespace ferrox {

std::string_view outcome_name(Outcome outcome) {
    switch (outcome) {
        case Outcome::Hit:
            return "hit";
        case Outcome::Miss:
            return "miss";
        case Outcome::ByDesign:
            return "by-design";
    }
    return "?";
}

std::string_view phase_name(Phase phase) { return phase == Phase::Probe ? "probe" : "dispatch"; }

std::string RegistryEntry::to_string() const {
    std::string_view label = outcome == Outcome::Hit    ? "kernel"
                             : outcome == Outcome::Miss ? "fallback"
                                                        : "reason";
    return fmt::format("{:<8} {:<6} {:<9} {:<16} {:<8} {:<9} {} '{}' ({}, x{}){}",
                       phase_name(phase), key.backend, op_name(key.op), key.role,
                       kind_name(key.kind), outcome_name(outcome), label, detail, site, count,
                       is_violation() ? "  VIOLATION" : "");
}

std::string RegistryReport::render() const {
    std::string out;
    for (const auto& e : entries) out += e.to_string() + "\n";
    out += fmt::format("{} entries, {} not hits, {} violations\n", entries.size(), misses.size(),
                       violations.size());
    return out;
}

std::string RegistryReport::render_violations() const {
    std::string out;
    for (const auto& v : violations) out += v.to_string() + "\n";
    return out;
}

void KernelRegistry::record(Phase phase, const RegistryKey& key, Outcome outcome,
                            std::string_view detail, bool accelerator, std::source_location site) {
    std::lock_guard lock(mutex_);
    auto [it, inserted] =
        entries_.try_emplace(Slot{key, phase, outcome, std::string(detail)}, RegistryEntry{});
    RegistryEntry& e = it->second;
    if (inserted) {
        e.key = key;
        e.phase = phase;
        e.outcome = outcome;
        e.detail = detail;
        e.accelerator = accelerator;
        e.site = fmt::format("{}:{}", std::filesystem::path(site.file_name()).filename().string(),
                             site.line());
    }
    ++e.count;
}

RegistryReport KernelRegistry::seal() const {
    std::lock_guard lock(mutex_);
    RegistryReport report;
    for (const auto& [slot, entry] : entries_) {
        report.entries.push_back(entry);
        if (entry.outcome != Outcome::Hit) report.misses.push_back(entry);
        if (entry.is_violation()) report.violations.push_back(entry);
    }
    return report;
}

void KernelRegistry::clear() {
    std::lock_guard lock(mutex_);
    entries_.clear();
}

}  // namespace ferrox

#include "ferrox/log.h"

namespace ferrox {

Expected<void> enforce_registry(const RegistryReport& report, bool strict) {
    if (report.violations.empty()) return {};
    const std::string listing = report.render_violations();
    if (strict)
        return make_error(
            "kernel registry: {} violation(s), and registry.strict is on -- an accelerator "
            "lacks these kernels and a slower fallback would run:\n{}",
            report.violations.size(), listing);
    logger().warn("kernel registry: {} violation(s) (slow fallbacks on an accelerator):\n{}",
                  report.violations.size(), listing);
    return {};
}

}  // namespace ferrox
