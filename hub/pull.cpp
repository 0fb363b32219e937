#include "ferrox/hub/pull.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "ferrox/escape.h"
#include "ferrox/gguf/file.h"
#include "ferrox/hub/sha256.h"

namespace fs = std::filesystem;

namespace ferrox::hub {
namespace {

constexpr uint64_t kMaxListingBytes = uint64_t{32} << 20;
constexpr size_t kMaxSiblings = 100000;

// What the hub's listing says of one file.
struct RemoteFile {
    uint64_t size = 0;   // 0: not stated
    std::string sha256;  // the LFS oid; empty: not stated
};

struct Failed {
    PullFailure* why;
    Error operator()(PullFailure kind, Error error) const {
        *why = kind;
        return error;
    }
};

PullFailure from_http(HttpFailure f) {
    switch (f) {
        case HttpFailure::NotFound:
            return PullFailure::NotFound;
        case HttpFailure::Unauthorized:
            return PullFailure::Unauthorized;
        case HttpFailure::Network:
            return PullFailure::Network;
        case HttpFailure::None:
        case HttpFailure::Status:
        case HttpFailure::Refused:
        case HttpFailure::Aborted:
            break;
    }
    return PullFailure::Remote;
}

std::string leaf_of(std::string_view name) { return fs::path(name).filename().string(); }

std::optional<uint64_t> parse_u64(std::string_view text) {
    uint64_t v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
    return v;
}

// GET /api/models/OWNER/REPO?blobs=true: the siblings with their sizes and LFS oids.
Expected<std::map<std::string, RemoteFile>> fetch_listing(const ModelRef& ref,
                                                          const HubSettings& hub,
                                                          PullFailure* why) {
    const Failed fail{why};
    std::string body;
    GetRequest request;
    request.url = fmt::format("{}/api/models/{}?blobs=true", hub.endpoint, ref.repo_id());
    request.on_body = [&](const Hop&, std::span<const char> piece) {
        if (body.size() + piece.size() > kMaxListingBytes) return false;
        body.append(piece.data(), piece.size());
        return true;
    };
    HttpFailure http = HttpFailure::None;
    auto fetched = http_get(hub, request, &http);
    if (!fetched) {
        if (http == HttpFailure::Aborted)
            return fail(PullFailure::Remote, make_error("the hub's listing of {} is over {} bytes",
                                                        ref.repo_id(), kMaxListingBytes));
        return fail(from_http(http), make_error("{}: {}", ref.text(), fetched.error().message()));
    }
    const auto doc = nlohmann::json::parse(body, nullptr, false);
    if (doc.is_discarded() || !doc.is_object() || !doc.contains("siblings") ||
        !doc["siblings"].is_array())
        return fail(PullFailure::Remote,
                    make_error("the hub's listing of {} ({}) is not JSON with a \"siblings\" array",
                               ref.repo_id(), request.url));
    const auto& siblings = doc["siblings"];
    if (siblings.size() > kMaxSiblings)
        return fail(PullFailure::Remote,
                    make_error("the hub lists {} files for {}; at most {} are read",
                               siblings.size(), ref.repo_id(), kMaxSiblings));
    std::map<std::string, RemoteFile> files;
    for (const auto& s : siblings) {
        if (!s.is_object() || !s.contains("rfilename") || !s["rfilename"].is_string()) continue;
        RemoteFile f;
        if (s.contains("size") && s["size"].is_number_unsigned())
            f.size = s["size"].get<uint64_t>();
        if (s.contains("lfs") && s["lfs"].is_object()) {
            const auto& lfs = s["lfs"];
            for (const char* key : {"sha256", "oid"})  // model info says sha256, the tree API oid
                if (lfs.contains(key) && lfs[key].is_string())
                    f.sha256 = normalized_sha256(lfs[key].get<std::string>());
            if (lfs.contains("size") && lfs["size"].is_number_unsigned())
                f.size = lfs["size"].get<uint64_t>();
        }
        files.emplace(s["rfilename"].get<std::string>(), std::move(f));
    }
    return files;
}

// Writes a download's body into the .part, checking where a resumed body starts.
struct PartWriter {
    int fd = -1;
    uint64_t have = 0;   // bytes in the part before this transfer
    uint64_t limit = 0;  // the most the file may be (0: unknown until the answer)
    uint64_t offset = 0;
    bool started = false;
    std::string error;
    PullFailure kind = PullFailure::Remote;

    bool start(const Hop& hop) {
        started = true;
        if (hop.status == 206) {  // Content-Range: bytes FIRST-LAST/TOTAL
            const std::string* range = hop.header("content-range");
            uint64_t first = 0;
            if (range != nullptr && range->starts_with("bytes ")) {
                const std::string_view r = std::string_view(*range).substr(6);
                const auto dash = r.find('-'), slash = r.find('/');
                auto a = parse_u64(r.substr(0, dash));
                auto total =
                    slash == std::string_view::npos ? std::nullopt : parse_u64(r.substr(slash + 1));
                if (a) first = *a;
                if (total && limit == 0) limit = *total;
                if (a && *a == have) {
                    offset = have;
                    return true;
                }
            }
            error = fmt::format("the server resumed at byte {} (Content-Range \"{}\"), not at {}",
                                first, range ? escape_text(*range) : "", have);
            return false;
        }
        // A whole body: the server ignored the Range (or none was sent).
        if (::ftruncate(fd, 0) != 0) return io_error();
        have = 0;
        offset = 0;
        if (limit == 0)
            if (const std::string* length = hop.header("content-length"))
                limit = parse_u64(*length).value_or(0);
        return true;
    }

    bool io_error() {
        error = fmt::format("cannot write the download: {}", std::strerror(errno));
        kind = PullFailure::Io;
        return false;
    }

    bool write(const Hop& hop, std::span<const char> bytes) {
        if (!started && !start(hop)) return false;
        if (limit != 0 && offset + bytes.size() > limit) {
            error = fmt::format("the server sent more than the {} bytes the file has", limit);
            return false;
        }
        while (!bytes.empty()) {
            const ssize_t n = ::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(offset));
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) return io_error();
            offset += static_cast<uint64_t>(n);
            bytes = bytes.subspan(static_cast<size_t>(n));
        }
        return true;
    }
};

uint64_t file_size(int fd) {
    struct stat st {};
    return ::fstat(fd, &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

// One file of the set into place: from the store when its digest matches,
// else downloaded (resuming a .part), verified, and renamed.
Expected<PulledFile> fetch_file(const ModelRef& ref, const std::string& name,
                                const RemoteFile& remote, const ModelStore& store,
                                const PullOptions& options, PullFailure* why) {
    const Failed fail{why};
    PulledFile out;
    out.name = name;
    out.path = store.path_of(ref.owner, ref.repo, name);
    const std::string shown = escape_text(out.path.string());
    auto folder = store.folder_of(ref.owner, ref.repo, name, true);
    if (!folder) return fail(PullFailure::Store, folder.error());
    const int dir = folder->get();
    const std::string leaf = leaf_of(name);

    struct stat st {};
    if (::fstatat(dir, leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
        if (!S_ISREG(st.st_mode))
            return fail(PullFailure::Store,
                        make_error("refused: {} is not a regular file (a symlink?); the store "
                                   "never follows links",
                                   shown));
        const std::string digest = read_digest_file(dir, leaf);
        if (!digest.empty() && digest == remote.sha256 &&
            (remote.size == 0 || remote.size == static_cast<uint64_t>(st.st_size))) {
            out.bytes = static_cast<uint64_t>(st.st_size);
            out.sha256 = digest;
            out.cached = true;
            return out;
        }
    }

    const std::string part = leaf + std::string(kPartSuffix);
    Fd pfd(
        ::openat(dir, part.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0600));
    if (!pfd)
        return fail(errno == ELOOP ? PullFailure::Store : PullFailure::Io,
                    make_error("cannot open {}{}: {}", shown, kPartSuffix, std::strerror(errno)));
    if (::fstat(pfd.get(), &st) != 0 || !S_ISREG(st.st_mode))
        return fail(PullFailure::Store,
                    make_error("refused: {}{} is not a regular file", shown, kPartSuffix));
    if (::flock(pfd.get(), LOCK_EX | LOCK_NB) != 0)
        return fail(PullFailure::Busy,
                    make_error("another ferrox pull is downloading {} (it holds {}{})", name, shown,
                               kPartSuffix));
    PartWriter writer;
    writer.fd = pfd.get();
    writer.have = static_cast<uint64_t>(st.st_size);
    writer.limit = remote.size;
    if (writer.limit != 0 && writer.have > writer.limit) {
        if (::ftruncate(pfd.get(), 0) != 0)
            return fail(PullFailure::Io, make_error("cannot truncate {}{}", shown, kPartSuffix));
        writer.have = 0;
    }
    out.resumed_from = writer.have;

    GetRequest request;
    request.url = fmt::format("{}/{}/resolve/main/{}", options.hub.endpoint, ref.repo_id(), name);
    if (writer.have > 0) request.range_from = writer.have;
    request.on_body = [&](const Hop& hop, std::span<const char> bytes) {
        return writer.write(hop, bytes);
    };
    if (options.on_progress)
        request.on_progress = [&](uint64_t received, uint64_t length) {
            const uint64_t base = writer.offset >= received ? writer.offset - received : 0;
            options.on_progress(name, base + received, writer.limit ? writer.limit : base + length);
        };
    HttpFailure http = HttpFailure::None;
    auto fetched = http_get(options.hub, request, &http);
    out.downloaded = writer.offset > writer.have ? writer.offset - writer.have : 0;
    const uint64_t in_part = file_size(pfd.get());
    if (!fetched) {
        if (http == HttpFailure::Aborted) {
            if (writer.kind != PullFailure::Io) ::unlinkat(dir, part.c_str(), 0);
            return fail(writer.kind, make_error("{}: {}", name, writer.error));
        }
        if (http == HttpFailure::Network && in_part > 0)
            return fail(
                PullFailure::Network,
                make_error("{}; {} of {} bytes are kept in {}{}: run the same pull again to "
                           "resume",
                           fetched.error().message(), in_part,
                           writer.limit ? fmt::format("{}", writer.limit) : "?", shown,
                           kPartSuffix));
        // 416: the part may already hold the whole file (a pull stopped before renaming).
        const bool complete_part =
            http == HttpFailure::Status && writer.have > 0 && writer.have == remote.size;
        if (!complete_part) {
            // A refused range: the part is not resumable; the next pull starts over.
            if (http == HttpFailure::Status && writer.have > 0 && ::ftruncate(pfd.get(), 0) != 0)
                return fail(PullFailure::Io,
                            make_error("cannot truncate {}{}", shown, kPartSuffix));
            return fail(from_http(http),
                        make_error("{}: {}", ref.text(), fetched.error().message()));
        }
    } else if (!writer.started && ::ftruncate(pfd.get(), 0) != 0) {  // an empty 200
        return fail(PullFailure::Io, make_error("cannot truncate {}{}", shown, kPartSuffix));
    }

    // The digest the hub publishes: the resolve answer's X-Linked-Etag (on its
    // redirect), else the listing's LFS oid; both when given must agree.
    std::string published;
    if (fetched) {
        if (const std::string* etag = fetched->header("x-linked-etag"))
            published = normalized_sha256(*etag);
        if (const std::string* size = fetched->header("x-linked-size"); size && writer.limit == 0)
            writer.limit = parse_u64(*size).value_or(0);
    }
    if (!published.empty() && !remote.sha256.empty() && published != remote.sha256) {
        ::unlinkat(dir, part.c_str(), 0);
        return fail(PullFailure::Remote,
                    make_error("{}: the hub publishes two SHA-256 digests ({} on the file, {} in "
                               "the listing); nothing is kept",
                               name, published, remote.sha256));
    }
    const std::string expected = published.empty() ? remote.sha256 : published;
    if (expected.empty()) {
        ::unlinkat(dir, part.c_str(), 0);
        return fail(PullFailure::Remote,
                    make_error("{}: the hub publishes no SHA-256 (no X-Linked-Etag, no LFS oid), "
                               "and an unverified file is not kept",
                               name));
    }
    const uint64_t size = file_size(pfd.get());
    if (writer.limit != 0 && size < writer.limit)
        return fail(PullFailure::Network,
                    make_error("{}: the transfer ended after {} of {} bytes, kept in {}{}: run the "
                               "same pull again to resume",
                               name, size, writer.limit, shown, kPartSuffix));
    auto actual = sha256_of_file(pfd.get(), shown + std::string(kPartSuffix));
    if (!actual) return fail(PullFailure::Io, actual.error());
    if (*actual != expected) {
        ::unlinkat(dir, part.c_str(), 0);
        return fail(PullFailure::Mismatch,
                    make_error("{}: checksum mismatch: expected SHA-256 {}, got {}; the download "
                               "is deleted",
                               name, expected, *actual));
    }
    if (::fsync(pfd.get()) != 0 || ::renameat(dir, part.c_str(), dir, leaf.c_str()) != 0)
        return fail(PullFailure::Io, make_error("cannot move {}{} into place: {}", shown,
                                                kPartSuffix, std::strerror(errno)));
    if (auto written = write_digest_file(dir, leaf, expected); !written)
        return fail(PullFailure::Io, written.error());
    out.bytes = size;
    out.sha256 = expected;
    return out;
}

void remove_file(const ModelStore& store, const ModelRef& ref, const std::string& name) {
    auto folder = store.folder_of(ref.owner, ref.repo, name, false);
    if (!folder) return;
    const std::string leaf = leaf_of(name);
    for (const std::string& n :
         {leaf, leaf + std::string(kDigestSuffix), leaf + std::string(kPartSuffix)})
        ::unlinkat(folder->get(), n.c_str(), 0);
}

// The header check every load does, on the files now in place.
Expected<void> check_gguf(const PullResult& result) {
    auto file = gguf::File::open(result.model_path());
    if (!file) return file.error();
    return {};
}

}  // namespace

bool offline_from_environment() {
    const char* v = std::getenv("FERROX_OFFLINE");
    if (v == nullptr) return false;
    const std::string s(v);
    return s == "1" || s == "true" || s == "yes" || s == "on";
}

Expected<PullResult> find_in_store(const ModelRef& ref, const ModelStore& store, PullFailure* why) {
    const Failed fail{why};
    *why = PullFailure::None;
    auto chosen = choose_files(ref, store.files_of(ref.owner, ref.repo));
    if (!chosen)
        return fail(PullFailure::NotFound,
                    make_error("{} is not in the model store {} ({}); `ferrox pull {}` fetches it",
                               ref.text(), escape_text(store.root().string()),
                               chosen.error().message(), ref.text()));
    PullResult result{ref, {}};
    for (const std::string& name : *chosen) {
        auto st = store.find_file(ref.owner, ref.repo, name);
        if (!st) return fail(PullFailure::Store, st.error());
        result.files.push_back(PulledFile{name, st->path, st->bytes, st->sha256, true, 0, 0});
    }
    return result;
}

Expected<PullResult> pull(const ModelRef& ref, const ModelStore& store, const PullOptions& options,
                          PullFailure* why) {
    const Failed fail{why};
    *why = PullFailure::None;
    if (options.offline) {
        auto found = find_in_store(ref, store, why);
        if (!found)
            return make_error("offline (--offline or FERROX_OFFLINE): {}", found.error().message());
        return found;
    }
    auto listing = fetch_listing(ref, options.hub, why);
    if (!listing) return listing.error();
    std::vector<std::string> names;
    for (const auto& [name, file] : *listing) names.push_back(name);
    auto chosen = choose_files(ref, names);
    if (!chosen) return fail(PullFailure::NotFound, chosen.error());
    for (const std::string& name : *chosen)
        if (auto ok = check_file_name(name); !ok)
            return fail(PullFailure::Remote,
                        make_error("{}: {}", ref.repo_id(), ok.error().message()));
    PullResult result{ref, {}};
    for (const std::string& name : *chosen) {
        auto file = fetch_file(ref, name, listing->at(name), store, options, why);
        if (!file) return file.error();
        if (options.on_file_done) options.on_file_done(name);
        result.files.push_back(std::move(*file));
    }
    if (auto readable = check_gguf(result); !readable) {
        for (const PulledFile& f : result.files)
            if (!f.cached) remove_file(store, ref, f.name);
        return fail(PullFailure::BadModel,
                    make_error("{} matched its SHA-256 but is not a GGUF file ferrox can read, and "
                               "was removed: {}",
                               ref.text(), readable.error().message()));
    }
    return result;
}

Expected<PullResult> remove_from_store(const ModelRef& ref, const ModelStore& store,
                                       PullFailure* why) {
    auto found = find_in_store(ref, store, why);
    if (!found) return found.error();
    for (const PulledFile& f : found->files) remove_file(store, ref, f.name);
    // Empty folders up to the owner's; rmdir refuses a folder that is not empty.
    for (const PulledFile& f : found->files)
        for (fs::path p = f.path.parent_path();
             p != store.root() && p.string().size() > store.root().string().size();
             p = p.parent_path())
            if (::rmdir(p.c_str()) != 0) break;
    return found;
}

}  // namespace ferrox::hub
