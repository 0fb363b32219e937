// tokenizer_vocab_files GGUF: encodes every case of GGUF.inp (cases separated
// by "\n__ggml_vocab_test__\n") without special tokens and compares with the
// ids in GGUF.out (a line per case), which llama.cpp made with Hugging Face tokenizers.
// Exits 77 (ctest: skipped) when the files are absent: run ci/fetch_test_data.sh.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "ferrox/gguf/file.h"
#include "ferrox/tokenizer/tokenizer.h"

namespace {

constexpr int kSkipped = 77;

std::vector<std::string> split_cases(const std::string& all, const std::string& separator) {
    std::vector<std::string> cases;
    size_t start = 0;
    for (size_t at = all.find(separator); at != std::string::npos;
         at = all.find(separator, start)) {
        cases.push_back(all.substr(start, at - start));
        start = at + separator.size();
    }
    // The text after the last separator is a case too where a file does not end
    // with a separator (gemma-4's .inp); elsewhere it is the empty trailing part.
    if (start < all.size()) cases.push_back(all.substr(start));
    return cases;
}

std::string read_all(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

std::vector<int32_t> parse_ids(const std::string& line) {
    std::vector<int32_t> ids;
    std::istringstream in(line);
    for (int32_t id = 0; in >> id;) ids.push_back(id);
    return ids;
}

std::string join(const std::vector<int32_t>& ids) {
    std::string s;
    for (const int32_t id : ids) s += " " + std::to_string(id);
    return s;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s ggml-vocab-NAME.gguf\n", argv[0]);
        return 2;
    }
    const std::string gguf_path = argv[1];
    if (!std::ifstream(gguf_path) || !std::ifstream(gguf_path + ".inp") ||
        !std::ifstream(gguf_path + ".out")) {
        std::printf("WARN: %s (or its .inp/.out) is absent; run ci/fetch_test_data.sh. Skipped.\n",
                    gguf_path.c_str());
        return kSkipped;
    }
    auto file = ferrox::gguf::File::open(gguf_path);
    if (!file) {
        std::printf("FAIL: %s\n", file.error().message().c_str());
        return 1;
    }
    auto tokenizer = ferrox::Tokenizer::from_gguf(*file);
    if (!tokenizer) {
        std::printf("FAIL: %s\n", tokenizer.error().message().c_str());
        return 1;
    }

    const auto inputs = split_cases(read_all(gguf_path + ".inp"), "\n__ggml_vocab_test__\n");
    // One line of ids per case.
    const auto outputs = split_cases(read_all(gguf_path + ".out"), "\n");
    if (inputs.empty() || inputs.size() != outputs.size()) {
        std::printf("FAIL: %zu inputs but %zu expected outputs\n", inputs.size(), outputs.size());
        return 1;
    }
    size_t failures = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
        const auto expected = parse_ids(outputs[i]);
        const auto actual = (*tokenizer)->encode(inputs[i], false, false);
        if (actual != expected) {
            ++failures;
            std::printf("case %zu '%s'\n  expected:%s\n  actual:  %s\n", i, inputs[i].c_str(),
                        join(expected).c_str(), join(actual).c_str());
        }
    }
    std::printf("%s: %zu/%zu cases identical\n", gguf_path.c_str(), inputs.size() - failures,
                inputs.size());
    return failures == 0 ? 0 : 1;
}
