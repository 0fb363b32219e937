// Text <-> token ids for the tokenizer families GGUF files carry: "llama"
// (SentencePiece: score-ranked bigram merges, byte fallback), "gpt2"
// (byte-level BPE: ranked merges after a regex pre-tokenizer), "gemma4"
// (BPE over SentencePiece's spelling: U+2581 spaces, <0xXX> byte fallback) and
// "bert" (WordPiece: the longest piece first, after BERT's normaliser) and
// "t5" (SentencePiece's unigram model: a Viterbi search over piece scores
// after the file's precompiled-charsmap normaliser).
// Behaviour follows llama.cpp's tokenizers token for token; the parity tests in
// tests/parity/ compare the two on the same GGUF files.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ferrox/api.h"
#include "ferrox/expected.h"

namespace ferrox {

namespace gguf {
class File;
}

namespace tokenizer_detail {
class Vocab;
struct Fragment;
}  // namespace tokenizer_detail

// tokenizer.ggml.token_type values.
enum class TokenType : int32_t {
    undefined = 0,
    normal = 1,
    unknown = 2,
    control = 3,
    user_defined = 4,
    unused = 5,
    byte = 6,
};

// Everything a tokenizer is built from: what from_gguf reads out of the
// tokenizer.ggml.* keys, or what a test writes by hand. Absent optionals take
// the per-model defaults llama.cpp uses.
struct FERROX_API VocabSpec {
    std::string model;  // "llama", "gpt2", "gemma4", "bert" or "t5" (tokenizer.ggml.model)
    std::string pre;    // pre-tokenizer name (BPE models only): qwen2, llama-bpe, ...
    std::vector<std::string> tokens;
    std::vector<float> scores;        // "llama": merge priority; empty = all 0
    std::vector<TokenType> types;     // empty = all normal
    std::vector<std::string> merges;  // BPE: "left right", rank = position
    std::optional<int32_t> bos, eos, unk, eot, eom;
    std::optional<int32_t> sep;  // "bert": [SEP], appended after the text with add_special
    std::optional<bool> add_bos, add_eos, add_space_prefix;
    // tokenizer.ggml.add_sep_token: a pair of texts gets SEP between them
    // (Tokenizer::pair_specials; default on for "bert" and a few BPE splits).
    std::optional<bool> add_sep;
    // "bert"'s normaliser (tokenizer.ggml.normalizer.*): lowercase (default on) and
    // strip accents (default: as lowercase).
    std::optional<bool> lowercase, strip_accents;
    // "t5": tokenizer.ggml.precompiled_charsmap's bytes (empty: no normaliser)
    // and tokenizer.ggml.remove_extra_whitespaces (default off, as llama.cpp).
    std::string precompiled_charsmap;
    std::optional<bool> remove_extra_whitespaces;
    // general.name: Phi-3 models strip the whitespace that follows most of
    // their special tokens (matched case-insensitively on "phi-3" / "phi3").
    std::string model_name;
};

// One piece of a prompt, and whether special-token text inside it becomes
// special tokens. A chat template's own text does; what a user typed does not,
// so "<end_of_turn>" in a message stays text and cannot end the turn early.
struct TextSegment {
    std::string_view text;
    bool parse_special = false;
};

// How llama-server joins a reranker's query and document where the file has
// no rerank template (its format_prompt_rerank): `before` query `between`
// document `after`, from BOS, EOS (SEP where the vocabulary has no EOS) and
// SEP, each where the file's add_bos / add_eos / add_sep flags say
// (tokenizer.ggml.add_*_token, else the model's defaults as llama.cpp's): a
// "bert" vocabulary gives [CLS] query [SEP] document. A flag whose token the
// vocabulary lacks adds nothing.
struct PairSpecials {
    std::vector<int32_t> before, between, after;
};

class FERROX_API Tokenizer {
  public:
    // An Error naming `model` when it is no tokenizer.ggml.model ferrox runs.
    static Expected<void> check_model(std::string_view model);
    // Refuses an unknown tokenizer.ggml.model / tokenizer.ggml.pre, naming key and value.
    static Expected<std::unique_ptr<Tokenizer>> from_gguf(const gguf::File& file);
    static Expected<std::unique_ptr<Tokenizer>> from_spec(VocabSpec spec);

    virtual ~Tokenizer();
    Tokenizer(const Tokenizer&) = delete;
    Tokenizer& operator=(const Tokenizer&) = delete;

    // add_special: prepend BOS / append EOS as the metadata says.
    // parse_special: "<start_of_turn>" in the text becomes that control token
    // (user-defined tokens are matched either way, as in HF and llama.cpp).
    // Text from a user is encoded with parse_special = false unless the user
    // asked otherwise (the CLI's --special).
    std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;
    // The concatenation of `segments`, encoded as one text (words and merges
    // run across segment edges), with special tokens cut out only inside the
    // segments whose parse_special is set; a special token's text split over
    // two segments stays text.
    std::vector<int32_t> encode(std::span<const TextSegment> segments, bool add_special) const;
    // The bytes a token stands for ("▁" -> " ", <0x0A> -> "\n"); control,
    // unknown and unused tokens give "". An id out of range gives "".
    virtual std::string token_to_piece(int32_t id) const = 0;
    std::string decode(std::span<const int32_t> ids) const;

    int32_t bos() const;  // -1 when the vocabulary has none
    int32_t eos() const;  // -1 when the vocabulary has none
    // Whether encode's add_special prepends BOS / appends EOS (add_bos_token / add_eos_token).
    bool adds_bos() const;
    bool adds_eos() const;
    PairSpecials pair_specials() const;
    // eos, eot, eom, and control tokens such as "<end_of_turn>" / "<|im_end|>".
    bool is_end_of_generation(int32_t id) const;
    size_t vocab_size() const;
    std::optional<int32_t> find_token(std::string_view text) const;

  protected:
    explicit Tokenizer(std::unique_ptr<const tokenizer_detail::Vocab> vocab);
    // The model's own algorithm over text already cut at special tokens.
    virtual std::vector<int32_t> encode_fragments(
        std::span<const tokenizer_detail::Fragment> fragments, bool add_special) const = 0;
    const tokenizer_detail::Vocab& vocab() const { return *vocab_; }

  private:
    std::unique_ptr<const tokenizer_detail::Vocab> vocab_;
};

}  // namespace ferrox
