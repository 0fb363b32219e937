"""SentencePiece unigram vocabularies for tests: trained here with the `sentencepiece`
package on seeded random multilingual text, written as GGUF tokenizer keys the way
llama.cpp's converter writes a T5 / XLM-RoBERTa vocabulary (tokenizer.ggml.model "t5";
facts from its conversion/t5.py and bert.py). Used by tests/parity/test_ugm_parity.py
and by make_tiny_models.py for the tiny models with a unigram vocabulary."""
from __future__ import annotations

import io
import random

import gguf

# Scripts the training text is drawn from.
TRAIN_POOLS = [
    "abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "0123456789",
    "\u00e4\u00f6\u00fc\u00df\u00e9\u00e8\u00ea\u00e7\u00f1\u00e5\u00f8",
    "\u043f\u0440\u0438\u0432\u0435\u0442\u043c\u0438\u0440\u0434\u043e\u043c",
    "\u65e5\u672c\u8a9e\u4e2d\u6587\u5b57\u3072\u3089\u304c\u306a",
    "\u0645\u0631\u062d\u0628\u0627", ".,;:!?'\"()-",
]
# The words tests/parity's embedding and rerank texts are made of, so a tiny model's
# vocabulary has pieces for them.
EXTRA_WORDS = ("the a river stone quiet lamp orbit velvet cedar ember harbor lantern meadow copper "
               "north glass signal tide where does meet hello world").split()


def random_word(rng: random.Random, pools) -> str:
    pool = rng.choice(pools)
    return "".join(rng.choice(pool) for _ in range(rng.randint(1, 7)))


def training_text(rng: random.Random) -> list[str]:
    words = [random_word(rng, TRAIN_POOLS) for _ in range(600)] + EXTRA_WORDS
    return [" ".join(rng.choice(words) for _ in range(rng.randint(3, 14))) for _ in range(3000)]


def train(seed: int, rule: str = "nmt_nfkc", remove_extra: bool = True, user_symbols=(),
          xlmr_ids: bool = False, vocab_size: int = 400) -> bytes:
    """A serialized SentencePiece unigram model. xlmr_ids: XLM-RoBERTa's special ids
    (<s>=0 <pad>=1 </s>=2 <unk>=3) instead of SentencePiece's (<unk>=0 <s>=1 </s>=2)."""
    import sentencepiece as spm

    ids = dict(bos_id=0, pad_id=1, eos_id=2, unk_id=3) if xlmr_ids else {}
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(training_text(random.Random(seed))), model_writer=model,
        model_type="unigram", vocab_size=vocab_size, character_coverage=1.0,
        normalization_rule_name=rule, remove_extra_whitespaces=remove_extra, add_dummy_prefix=True,
        byte_fallback=False, user_defined_symbols=list(user_symbols), minloglevel=2, num_threads=1, **ids)
    return model.getvalue()


def add_tokenizer(w: gguf.GGUFWriter, model: bytes) -> int:
    """Writes MODEL's vocabulary as tokenizer.ggml.* keys; returns the token count."""
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2 as pb

    proto = pb.ModelProto()
    proto.ParseFromString(model)
    sp = spm.SentencePieceProcessor(model_proto=model)
    tokens, scores, types = [], [], []
    for i in range(sp.get_piece_size()):
        tokens.append(sp.id_to_piece(i).encode())
        scores.append(sp.get_score(i))
        if sp.is_unknown(i):
            types.append(gguf.TokenType.UNKNOWN)
        elif sp.is_control(i):
            types.append(gguf.TokenType.CONTROL)
        elif sp.is_unused(i):
            types.append(gguf.TokenType.UNUSED)
        elif sp.is_byte(i):
            types.append(gguf.TokenType.BYTE)
        elif proto.pieces[i].type == pb.ModelProto.SentencePiece.USER_DEFINED:
            types.append(gguf.TokenType.USER_DEFINED)
        else:
            types.append(gguf.TokenType.NORMAL)
    w.add_tokenizer_model("t5")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_add_space_prefix(proto.normalizer_spec.add_dummy_prefix)
    w.add_remove_extra_whitespaces(proto.normalizer_spec.remove_extra_whitespaces)
    if proto.normalizer_spec.precompiled_charsmap:
        w.add_precompiled_charsmap(proto.normalizer_spec.precompiled_charsmap)
    w.add_unk_token_id(sp.unk_id())
    if sp.bos_id() >= 0:
        w.add_bos_token_id(sp.bos_id())
    if sp.eos_id() >= 0:
        w.add_eos_token_id(sp.eos_id())
    return len(tokens)


def write_vocab_only(model: bytes, path) -> None:
    """A vocab-only GGUF (architecture bert, as llama.cpp's vocab files carry one)."""
    w = gguf.GGUFWriter(str(path), "bert")
    w.add_name("ugm-test")
    w.add_block_count(1)
    w.add_context_length(512)
    w.add_embedding_length(8)
    w.add_feed_forward_length(16)
    w.add_head_count(2)
    w.add_layer_norm_eps(1e-12)
    add_tokenizer(w, model)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
