// Vocabularies ferrox cannot tokenize are refused with the key and value named.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ferrox/gguf/file.h"
#include "tokenizer_test_support.h"

namespace {

// A GGUF v3 file holding only string metadata (and string arrays).
class TinyGguf {
  public:
    void string(const std::string& key, const std::string& value) {
        header(key, 8);
        str(value);
        ++count_;
    }
    void strings(const std::string& key, const std::vector<std::string>& values) {
        header(key, 9);
        u32(8);
        u64(values.size());
        for (const auto& v : values) str(v);
        ++count_;
    }
    std::filesystem::path write(const std::string& name) const {
        const auto path = std::filesystem::temp_directory_path() / name;
        std::ofstream out(path, std::ios::binary);
        std::string head = "GGUF";
        const auto put = [&](uint64_t v, int bytes) {
            for (int i = 0; i < bytes; ++i)
                head.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
        };
        put(3, 4);
        put(0, 8);
        put(count_, 8);
        out << head << body_;
        return path;
    }

  private:
    void u32(uint32_t v) {
        for (int i = 0; i < 4; ++i) body_.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
    }
    void u64(uint64_t v) {
        for (int i = 0; i < 8; ++i) body_.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
    }
    void str(const std::string& s) {
        u64(s.size());
        body_ += s;
    }
    void header(const std::string& key, uint32_t type) {
        str(key);
        u32(type);
    }
    std::string body_;
    uint64_t count_ = 0;
};

}  // namespace

TEST_CASE("refusal: an unknown tokenizer.ggml.model is named with its value") {
    TinyGguf g;
    g.string("tokenizer.ggml.model", "rwkv");  // RWKV's trie tokenizer, which ferrox does not run
    g.strings("tokenizer.ggml.tokens", {"a"});
    auto file = ferrox::gguf::File::open(g.write("ferrox_tok_rwkv.gguf"));
    REQUIRE(file);
    auto tok = ferrox::Tokenizer::from_gguf(*file);
    REQUIRE_FALSE(tok);
    CHECK_THAT(tok.error().message(), Catch::Contains("tokenizer.ggml.model") &&
                                          Catch::Contains("'rwkv'") &&
                                          Catch::Contains("ferrox_tok_rwkv.gguf"));
}

TEST_CASE("refusal: an unknown tokenizer.ggml.pre is named with its value") {
    TinyGguf g;
    g.string("tokenizer.ggml.model", "gpt2");
    g.string("tokenizer.ggml.pre", "mystery-pre");
    g.strings("tokenizer.ggml.tokens", {"a", "b"});
    g.strings("tokenizer.ggml.merges", {"a b"});
    auto file = ferrox::gguf::File::open(g.write("ferrox_tok_pre.gguf"));
    REQUIRE(file);
    auto tok = ferrox::Tokenizer::from_gguf(*file);
    REQUIRE_FALSE(tok);
    CHECK_THAT(tok.error().message(),
               Catch::Contains("tokenizer.ggml.pre") && Catch::Contains("'mystery-pre'"));
}

TEST_CASE("refusal: a file without tokenizer metadata says which key is missing") {
    TinyGguf g;
    g.string("general.name", "no tokenizer");
    auto file = ferrox::gguf::File::open(g.write("ferrox_tok_none.gguf"));
    REQUIRE(file);
    auto tok = ferrox::Tokenizer::from_gguf(*file);
    REQUIRE_FALSE(tok);
    CHECK_THAT(tok.error().message(), Catch::Contains("tokenizer.ggml.model"));
}

TEST_CASE("refusal: a BOS id outside the vocabulary is refused") {
    ferrox::VocabSpec spec;
    spec.model = "llama";
    spec.tokens = {"a", "b"};
    spec.bos = 7;
    auto tok = ferrox::Tokenizer::from_spec(spec);
    REQUIRE_FALSE(tok);
    CHECK_THAT(tok.error().message(), Catch::Contains("BOS id 7"));
}

TEST_CASE("refusal: a token type outside GGUF's 0..6 is refused, naming the token") {
    ferrox::VocabSpec spec;
    spec.model = "llama";
    spec.tokens = {"a", "b", "c"};
    spec.types = {ferrox::TokenType::normal, static_cast<ferrox::TokenType>(9),
                  ferrox::TokenType::control};
    auto tok = ferrox::Tokenizer::from_spec(spec);
    REQUIRE_FALSE(tok);
    CHECK_THAT(tok.error().message(), Catch::Contains("token 1 has type 9"));
}
