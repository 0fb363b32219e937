// SHA-256 through OpenSSL's libcrypto: libcurl already loads it (libcurl4 links
// libssl3), it is maintained and uses the CPU's SHA extensions where there are
// some, which matters when a pull hashes several GB. Tested against FIPS 180-2's
// vectors and against Python's hashlib (the loopback hub publishes its digests).
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>

#include "ferrox/expected.h"

namespace ferrox::hub {

class Sha256 {
  public:
    Sha256();
    ~Sha256();
    Sha256(const Sha256&) = delete;
    Sha256& operator=(const Sha256&) = delete;
    void update(std::span<const std::byte> bytes);
    std::string hex_digest();  // lowercase; ends this hash

  private:
    struct Ctx;
    std::unique_ptr<Ctx> ctx_;
};

// The digest of everything `fd` holds from offset 0 (read with pread, so the
// descriptor's offset is untouched). The Error names `name_for_errors`.
Expected<std::string> sha256_of_file(int fd, const std::string& name_for_errors);

// A digest as the hub publishes it ("<hex>" quoted, maybe W/), lowercased;
// empty unless it is 64 hex digits.
std::string normalized_sha256(std::string_view published);

}  // namespace ferrox::hub
