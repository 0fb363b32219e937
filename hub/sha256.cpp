#include "ferrox/hub/sha256.h"

#include <openssl/evp.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace ferrox::hub {

struct Sha256::Ctx {
    EVP_MD_CTX* md = nullptr;
};

Sha256::Sha256() : ctx_(std::make_unique<Ctx>()) {
    ctx_->md = EVP_MD_CTX_new();
    if (ctx_->md == nullptr || EVP_DigestInit_ex(ctx_->md, EVP_sha256(), nullptr) != 1)
        throw std::runtime_error("OpenSSL could not start a SHA-256 digest");
}

Sha256::~Sha256() { EVP_MD_CTX_free(ctx_->md); }

void Sha256::update(std::span<const std::byte> bytes) {
    if (EVP_DigestUpdate(ctx_->md, bytes.data(), bytes.size()) != 1)
        throw std::runtime_error("OpenSSL's SHA-256 update failed");
}

std::string Sha256::hex_digest() {
    std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
    unsigned int n = 0;
    if (EVP_DigestFinal_ex(ctx_->md, digest.data(), &n) != 1)
        throw std::runtime_error("OpenSSL's SHA-256 final failed");
    static constexpr char kHex[] = "0123456789abcdef";
    std::string hex;
    for (unsigned int i = 0; i < n; ++i) {
        hex += kHex[digest[i] >> 4];
        hex += kHex[digest[i] & 15];
    }
    return hex;
}

Expected<std::string> sha256_of_file(int fd, const std::string& name_for_errors) {
    Sha256 hash;
    std::vector<std::byte> buffer(size_t{4} << 20);
    for (off_t at = 0;;) {
        const ssize_t n = ::pread(fd, buffer.data(), buffer.size(), at);
        if (n < 0) {
            if (errno == EINTR) continue;
            return make_error("cannot read {}: {}", name_for_errors, std::strerror(errno));
        }
        if (n == 0) break;
        hash.update(std::span(buffer.data(), static_cast<size_t>(n)));
        at += n;
    }
    return hash.hex_digest();
}

std::string normalized_sha256(std::string_view published) {
    if (published.starts_with("W/")) published.remove_prefix(2);
    if (published.size() >= 2 && published.front() == '"' && published.back() == '"')
        published = published.substr(1, published.size() - 2);
    if (published.size() != 64) return {};
    std::string out;
    for (char c : published) {
        if (c >= 'A' && c <= 'F') c = static_cast<char>(c - 'A' + 'a');
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return {};
        out += c;
    }
    return out;
}

}  // namespace ferrox::hub
