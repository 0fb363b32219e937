// The text rules of model references and stored names, the file choice, and
// the SHA-256 wrapper: pure functions, no network.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "ferrox/hub/http_client.h"
#include "ferrox/hub/model_ref.h"
#include "ferrox/hub/sha256.h"

using namespace ferrox::hub;

namespace {

std::vector<std::string> chosen(const std::string& ref, const std::vector<std::string>& names) {
    auto parsed = parse_model_ref(ref);
    REQUIRE(parsed);
    auto files = choose_files(*parsed, names);
    INFO((files ? std::string() : files.error().message()));
    REQUIRE(files);
    return *files;
}

std::string sha(std::string_view text) {
    Sha256 h;
    h.update(std::as_bytes(std::span(text.data(), text.size())));
    return h.hex_digest();
}

}  // namespace

TEST_CASE("references parse into owner, repo and a file or a quant tag") {
    auto url = parse_model_ref("hf://Qwen/Qwen3-0.6B-GGUF/sub/Qwen3-0.6B-Q8_0.gguf");
    REQUIRE(url);
    CHECK(url->owner == "Qwen");
    CHECK(url->repo == "Qwen3-0.6B-GGUF");
    CHECK(url->file == "sub/Qwen3-0.6B-Q8_0.gguf");
    auto tag = parse_model_ref("unsloth/gemma-3-270m-it-GGUF:q4_k_m");
    REQUIRE(tag);
    CHECK(tag->quant == "q4_k_m");
    CHECK(tag->text() == "unsloth/gemma-3-270m-it-GGUF:q4_k_m");
    CHECK(parse_model_ref("hf://a/b:Q8_0")->quant == "Q8_0");
    CHECK(parse_model_ref("a/b")->quant.empty());
}

TEST_CASE("references that could leave the store or that are malformed are refused") {
    for (const char* bad : {"hf://a/b/../x.gguf", "hf://a/b//x.gguf", "hf://a/b/x.bin", "../a:Q8_0",
                            "a/..:Q8_0", "a/b:Q8/0", "a/b/x.gguf", "hf://a", "a/b:", "-a/b:Q8_0",
                            "hf://a/b/.x.gguf", "hf://a/b/x\x01.gguf"}) {
        INFO(bad);
        CHECK_FALSE(parse_model_ref(bad));
    }
}

TEST_CASE("a model argument is a reference only by its syntax") {
    CHECK(is_reference_syntax("hf://a/b/c.gguf"));
    CHECK(is_reference_syntax("owner/repo:Q8_0"));
    CHECK_FALSE(is_reference_syntax("models/tiny.gguf"));
    CHECK_FALSE(is_reference_syntax("/abs/owner/repo:Q8_0"));
    CHECK_FALSE(is_reference_syntax("a/b/c:Q8_0"));
    CHECK_FALSE(is_reference_syntax("model.gguf"));
}

TEST_CASE("stored names: relative, plain parts, no control characters") {
    CHECK(check_file_name("Model-Q4_K_M.gguf"));
    CHECK(check_file_name("Q4_K_M/Model-Q4_K_M-00001-of-00002.gguf"));
    for (const char* bad :
         {"../x.gguf", "/etc/x.gguf", "a//b.gguf", "a/./b.gguf", ".hidden.gguf", "a\nb.gguf",
          "a\x1b[2Jb.gguf", "a b.gguf", "a\\b.gguf", "1/2/3/4/5.gguf", ""}) {
        INFO(bad);
        auto ok = check_file_name(bad);
        REQUIRE_FALSE(ok);
        CHECK_THAT(ok.error().message(), Catch::Contains("refused the file name"));
        CHECK(ok.error().message().find('\x1b') == std::string::npos);
    }
}

TEST_CASE("split names give the whole set, first shard first") {
    auto split = parse_split_name("m-Q8_0-00002-of-00003.gguf");
    REQUIRE(split);
    CHECK(split->stem == "m-Q8_0");
    CHECK(split_set(*split) == std::vector<std::string>{"m-Q8_0-00001-of-00003.gguf",
                                                        "m-Q8_0-00002-of-00003.gguf",
                                                        "m-Q8_0-00003-of-00003.gguf"});
    CHECK_FALSE(parse_split_name("m-00004-of-00003.gguf"));
    CHECK_FALSE(parse_split_name("m-00000-of-00003.gguf"));
    CHECK_FALSE(parse_split_name("m-0001-of-00003.gguf"));
}

TEST_CASE("a quant tag chooses one model: case-insensitive, mmproj never, a set whole") {
    const std::vector<std::string> repo{"README.md",
                                        "m-Q4_K_M.gguf",
                                        "m-Q4_K_S.gguf",
                                        "mmproj-m-Q8_0.gguf",
                                        "m-Q8_0.gguf",
                                        "m-IQ4_XS.gguf",
                                        "m-Q4_K.gguf",
                                        "big/m-BF16-00001-of-00002.gguf",
                                        "big/m-BF16-00002-of-00002.gguf"};
    CHECK(chosen("a/b:q8_0", repo) == std::vector<std::string>{"m-Q8_0.gguf"});
    CHECK(chosen("a/b:Q4_K_M", repo) == std::vector<std::string>{"m-Q4_K_M.gguf"});
    // Q4_K is in three names; only one holds it as a word of its own.
    CHECK(chosen("a/b:Q4_K", repo) == std::vector<std::string>{"m-Q4_K.gguf"});
    CHECK(chosen("a/b:bf16", repo) == std::vector<std::string>{"big/m-BF16-00001-of-00002.gguf",
                                                               "big/m-BF16-00002-of-00002.gguf"});
    CHECK(chosen("a/b", repo) == std::vector<std::string>{"m-Q4_K_M.gguf"});  // the default tag
    auto none = choose_files(*parse_model_ref("a/b:Q2_K"), repo);
    REQUIRE_FALSE(none);
    CHECK_THAT(none.error().message(), Catch::Contains("m-Q8_0.gguf"));
    auto several = choose_files(*parse_model_ref("a/b:Q4"), repo);
    REQUIRE_FALSE(several);
    CHECK_THAT(several.error().message(), Catch::Contains("matches 4 models"));
    auto missing = choose_files(*parse_model_ref("hf://a/b/m-X-00001-of-00002.gguf"),
                                {"m-X-00001-of-00002.gguf"});
    REQUIRE_FALSE(missing);
    CHECK_THAT(missing.error().message(), Catch::Contains("m-X-00002-of-00002.gguf"));
}

TEST_CASE("SHA-256 matches FIPS 180-2's examples, in pieces or whole") {
    CHECK(sha("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK(sha("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    const std::string two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    CHECK(sha(two_blocks) == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    Sha256 pieces;
    for (char c : two_blocks) pieces.update(std::as_bytes(std::span(&c, 1)));
    CHECK(pieces.hex_digest() == sha(two_blocks));
}

TEST_CASE("published digests are read as the hub quotes them, anything else as none") {
    const std::string hex(64, 'a');
    CHECK(normalized_sha256("\"" + hex + "\"") == hex);
    CHECK(normalized_sha256("W/\"" + std::string(64, 'A') + "\"") == hex);
    CHECK(normalized_sha256("\"" + std::string(40, 'a') + "\"").empty());  // a git sha1
    CHECK(normalized_sha256(std::string(63, 'a') + "g").empty());
}

TEST_CASE("origins compare scheme, host and port: another port is another host") {
    CHECK(origin_of("https://huggingface.co/a/b") == "https://huggingface.co:443");
    CHECK(origin_of("HTTPS://HuggingFace.co:443/x") == "https://huggingface.co:443");
    CHECK(origin_of("http://127.0.0.1:8080/x") != origin_of("http://127.0.0.1:8081/x"));
    CHECK(origin_of("not a url").empty());
}

TEST_CASE("a token travels over https, or over http only to this host") {
    CHECK(token_may_travel_to(origin_of("https://huggingface.co/x")));
    CHECK(token_may_travel_to(origin_of("http://127.0.0.1:8080/x")));
    CHECK(token_may_travel_to(origin_of("http://127.4.5.6:80/x")));
    CHECK(token_may_travel_to(origin_of("http://localhost:9/x")));
    CHECK(token_may_travel_to(origin_of("http://[::1]:9/x")));
    CHECK_FALSE(token_may_travel_to(origin_of("http://mirror.example.com/x")));
    CHECK_FALSE(token_may_travel_to(origin_of("http://10.0.0.7:8080/x")));
    CHECK_FALSE(token_may_travel_to(origin_of("http://127.0.0.1.example.com/x")));
    CHECK_FALSE(token_may_travel_to(origin_of("http://128.0.0.1/x")));
    CHECK_FALSE(token_may_travel_to(""));
}
