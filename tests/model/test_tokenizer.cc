// Tokenizer building blocks on hand-made vocabularies, where the right answer can be worked
// out by hand. The real vocabularies are checked against Hugging Face's GGUF tokenizer
// loader in tests/python/test_tokenizer.py, and on WikiText in test_tokenizer_models.cc.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/bpe_byte_map.h"
#include "model/bpe_pretokenizer.h"
#include "model/chat_template.h"
#include "model/gguf.h"
#include "model/tokenizer.h"
#include "model/tokenizer_special.h"
#include "model/tokenizer_stream.h"
#include "model/tokenizer_utf8.h"
#include "tests/model/gguf_builder.h"
#include "util/error.h"

namespace rpa {
namespace {

using Ids = std::vector<int32_t>;
using testing::GgufBuilder;
using testing::kGF32;
using testing::kGI32;
using Pieces = std::vector<std::string_view>;
const std::string kFffd = "\xEF\xBF\xBD";  // U+FFFD

// ---- UTF-8 -----------------------------------------------------------------------------

TEST(TokenizerUtf8Test, FindsFirstIllFormedByte) {
  EXPECT_EQ(FindInvalidUtf8("abc \xC3\xA9 \xE6\x97\xA5 \xF0\x9F\x98\x80"), std::string_view::npos);
  EXPECT_EQ(FindInvalidUtf8("ab\xC0\xAF"), 2u);        // overlong '/'
  EXPECT_EQ(FindInvalidUtf8("a\xED\xA0\x80"), 1u);     // surrogate U+D800
  EXPECT_EQ(FindInvalidUtf8("\xF4\x90\x80\x80"), 0u);  // past U+10FFFF
  EXPECT_EQ(FindInvalidUtf8("xy\xE6\x97"), 2u);        // truncated
  EXPECT_EQ(FindInvalidUtf8("\x80"), 0u);              // lone continuation byte
}

TEST(TokenizerUtf8Test, StreamHoldsBackASplitCharacter) {
  Utf8StreamDecoder d;
  EXPECT_EQ(d.Push("a\xF0\x9F"), "a");  // first half of U+1F600
  EXPECT_TRUE(d.pending());
  EXPECT_EQ(d.Push("\x98"), "");
  EXPECT_EQ(d.Push("\x80!"), "\xF0\x9F\x98\x80!");
  EXPECT_FALSE(d.pending());
  EXPECT_EQ(d.Flush(), "");
}

TEST(TokenizerUtf8Test, ReplacesMaximalSubparts) {
  // As Python's b"\xe6\x97A\xed\xa0\x80\xc0".decode("utf-8", "replace"): E6 97 is one
  // truncated sequence; ED cannot be followed by A0, so ED, A0 and 80 are one each; C0 can
  // start nothing.
  Utf8StreamDecoder d;
  EXPECT_EQ(d.Push("\xE6\x97"
                   "A\xED\xA0\x80\xC0"),
            kFffd + "A" + kFffd + kFffd + kFffd + kFffd);
  EXPECT_FALSE(d.pending());
  EXPECT_EQ(d.Push("z\xE6\x97"), "z");
  EXPECT_EQ(d.Flush(), kFffd);  // the stream ended inside a character
  EXPECT_EQ(d.Push("q"), "q");  // and Flush reset it
}

// ---- byte-level building blocks ----------------------------------------------------------

TEST(BpeByteMapTest, Gpt2Alphabet) {
  EXPECT_EQ(ByteToUnicode(' '), U'\u0120');   // 'Ġ'
  EXPECT_EQ(ByteToUnicode('\n'), U'\u010A');  // 'Ċ'
  EXPECT_EQ(ByteToUnicode('A'), U'A');
  EXPECT_EQ(ByteToUnicode(0x7F), U'\u0121');  // first byte after the 33 below '!'
  EXPECT_EQ(ByteToUnicode(0xAD), U'\u0143');  // the soft hyphen, last of the 68 remapped
  EXPECT_EQ(UnicodeToByte(U'\u0144'), -1);
  for (int b = 0; b < 256; ++b) ASSERT_EQ(UnicodeToByte(ByteToUnicode(b)), b) << b;
  const std::string all = [] {
    std::string s;
    for (int b = 0; b < 256; ++b) s.push_back(static_cast<char>(b));
    return s;
  }();
  EXPECT_EQ(BpeTextToBytes(BytesToBpeText(all)), all);
  EXPECT_EQ(BytesToBpeText("a b"),
            "a\xC4\xA0"
            "b");
}

Pieces SplitWith(std::string_view pre, std::string_view text) {
  RegexSplitter splitter(PreTokenizerRegexes(pre));
  Pieces out;
  splitter.Split(text, &out);
  return out;
}

TEST(BpePreTokenizerTest, SmolLmSplitsDigitsThenGpt2) {
  EXPECT_EQ(SplitWith("smollm", "Hello world! 123"),
            (Pieces{"Hello", " world", "!", " ", "1", "2", "3"}));
  // A whitespace run before a word gives its last space to the word; one at the end stays.
  EXPECT_EQ(SplitWith("smollm", "I'm  here\n\n"), (Pieces{"I", "'m", " ", " here", "\n\n"}));
  EXPECT_EQ(SplitWith("gpt2", "x 123 \xE6\x97\xA5\xE6\x9C\xAC"),
            (Pieces{"x", " 123", " \xE6\x97\xA5\xE6\x9C\xAC"}));
  EXPECT_TRUE(SplitWith("smollm", "").empty());
}

TEST(BpePreTokenizerTest, NextLineIsWhitespace) {
  // U+0085 is White_Space for llama.cpp and Hugging Face; PCRE2's \s lacks it. Were it a
  // symbol, "!\u0085" would be one piece.
  EXPECT_EQ(SplitWith("gpt2", "!\xC2\x85"), (Pieces{"!", "\xC2\x85"}));
}

TEST(BpePreTokenizerTest, UnknownPreTokenizerThrows) {
  EXPECT_THROW(PreTokenizerRegexes("nonsense"), InvalidArgument);
}

TEST(SpecialTokenMatcherTest, LeftmostLongest) {
  SpecialTokenMatcher m;
  m.Add("<a>", 1, /*control=*/true);
  m.Add("<a><b>", 2, /*control=*/true);
  m.Add("\n", 3, /*control=*/false);
  m.Add("\n\n", 4, /*control=*/false);
  const std::string_view text = "x<a><b>\n\n\n<a>";
  auto m1 = m.FindNext(text, 0, true);
  ASSERT_TRUE(m1);
  EXPECT_EQ(m1->offset, 1u);
  EXPECT_EQ(m1->length, 6u);
  EXPECT_EQ(m1->id, 2);
  auto m2 = m.FindNext(text, 7, true);
  ASSERT_TRUE(m2);
  EXPECT_EQ(m2->id, 4);
  auto m3 = m.FindNext(text, 9, true);
  ASSERT_TRUE(m3);
  EXPECT_EQ(m3->id, 3);
  // Without control tokens only the user-defined newlines match.
  auto m4 = m.FindNext(text, 0, false);
  ASSERT_TRUE(m4);
  EXPECT_EQ(m4->offset, 7u);
  EXPECT_FALSE(m.FindNext(text, 10, false));
}

// ---- byte-level BPE --------------------------------------------------------------------

// 256 byte tokens (id = byte), then the given merges' results, then a control token.
TokenizerSpec ByteLevelSpec(const std::vector<std::string>& merges) {
  TokenizerSpec spec;
  spec.model = "gpt2";
  spec.pre = "gpt2";
  for (int b = 0; b < 256; ++b) {
    std::string t;
    AppendUtf8(ByteToUnicode(static_cast<uint8_t>(b)), &t);
    spec.tokens.push_back(t);
  }
  for (const std::string& m : merges) {
    const size_t sp = m.find(' ');
    spec.tokens.push_back(m.substr(0, sp) + m.substr(sp + 1));
  }
  spec.merges = merges;
  spec.tokens.push_back("<|end|>");
  spec.types.assign(spec.tokens.size(), TokenType::kNormal);
  spec.types.back() = TokenType::kControl;
  spec.eos_id = static_cast<int32_t>(spec.tokens.size() - 1);
  return spec;
}

TEST(BpeTokenizerTest, LowestRankFirst) {
  // "abc": with "b c" ranked first, b+c merge and a stays; with "a b" first, the reverse.
  auto t1 = Tokenizer::Create(ByteLevelSpec({"b c", "a b"}));
  EXPECT_EQ(t1->Encode("abc"), (Ids{'a', 256}));
  auto t2 = Tokenizer::Create(ByteLevelSpec({"a b", "b c"}));
  EXPECT_EQ(t2->Encode("abc"), (Ids{256, 'c'}));
  // Merges chain: "ab c" needs "a b" first.
  auto t3 = Tokenizer::Create(ByteLevelSpec({"a b", "ab c"}));
  EXPECT_EQ(t3->Encode("abcab"), (Ids{257, 256}));
}

TEST(BpeTokenizerTest, LeftmostOnTiesAndSpacesInAlphabet) {
  auto t = Tokenizer::Create(ByteLevelSpec({"\xC4\xA0 a", "a a"}));  // 256 "Ġa" (' '+'a'), 257 "aa"
  EXPECT_EQ(t->Encode("aaa"), (Ids{257, 'a'}));                      // leftmost "a a" first
  EXPECT_EQ(t->Encode("aaa aaa"), (Ids{257, 'a', 256, 257}));        // second word " aaa"
  EXPECT_EQ(t->Encode("aaa"), (Ids{257, 'a'}));                      // from the word cache
  EXPECT_EQ(t->Decode(t->Encode("aaa aaa")), "aaa aaa");
}

TEST(BpeTokenizerTest, SpecialsOnlyWhenParsing) {
  auto t = Tokenizer::Create(ByteLevelSpec({}));
  const int32_t end = *t->eos_id();
  EXPECT_EQ(t->Encode("a<|end|>", true, true), (Ids{'a', end}));
  const Ids plain = t->Encode("a<|end|>", true, false);
  EXPECT_EQ(plain.size(), 8u);  // 'a' then "<|end|>" byte by byte
  EXPECT_EQ(t->Decode(plain), "a<|end|>");
  EXPECT_EQ(t->Decode(Ids{'a', end}), "a");
  EXPECT_EQ(t->Decode(Ids{'a', end}, /*render_special=*/true), "a<|end|>");
}

TEST(BpeTokenizerTest, MultiByteCharacterAcrossTokens) {
  auto t = Tokenizer::Create(ByteLevelSpec({}));
  const Ids ids = t->Encode("\xC3\xA9");  // 'é' = C3 A9, one token per byte here
  ASSERT_EQ(ids, (Ids{0xC3, 0xA9}));
  EXPECT_EQ(t->TokenPiece(ids[0]), "\xC3");
  Utf8StreamDecoder d;
  EXPECT_EQ(d.Push(t->TokenPiece(ids[0])), "");
  EXPECT_EQ(d.Push(t->TokenPiece(ids[1])), "\xC3\xA9");
  EXPECT_EQ(t->Decode(Ids{0xC3}), kFffd);  // a lone lead byte
}

TEST(BpeTokenizerTest, LongWordIsFast) {
  // O(n log n) merging: a 200 kB word of one letter would take minutes at O(n^2).
  auto t = Tokenizer::Create(ByteLevelSpec({"a a", "aa aa"}));
  const std::string word(200000, 'a');
  const Ids ids = t->Encode(word);
  EXPECT_EQ(ids.size(), 50000u);
  EXPECT_EQ(ids[0], 257);
}

TEST(BpeTokenizerTest, RejectsBadInput) {
  auto t = Tokenizer::Create(ByteLevelSpec({}));
  EXPECT_THROW(t->Encode("ok\xFF"), InvalidArgument);
  EXPECT_THROW(t->Decode(Ids{-1}), InvalidArgument);
  EXPECT_THROW(t->Decode(Ids{t->vocab_size()}), InvalidArgument);
  TokenizerSpec bad = ByteLevelSpec({"ab"});
  EXPECT_THROW(Tokenizer::Create(bad), InvalidArgument);  // merge without a space
  TokenizerSpec no_byte = ByteLevelSpec({});
  no_byte.tokens[7] = "x7";  // byte 7 has no token: unknown when there is one, else an error
  EXPECT_THROW(Tokenizer::Create(no_byte)->Encode("a\x07"), InvalidArgument);
  no_byte.unk_id = 'x';
  EXPECT_EQ(Tokenizer::Create(no_byte)->Encode("a\x07"), (Ids{'a', 'x'}));
  TokenizerSpec bad_id = ByteLevelSpec({});
  bad_id.bos_id = 100000;
  EXPECT_THROW(Tokenizer::Create(bad_id), InvalidArgument);
  TokenizerSpec bad_model = ByteLevelSpec({});
  bad_model.model = "wordpiece";
  EXPECT_THROW(Tokenizer::Create(bad_model), InvalidArgument);
}

// ---- SentencePiece-style BPE -------------------------------------------------------------

constexpr const char* kSp = "\xE2\x96\x81";  // '▁'

TokenizerSpec SentencePieceSpec() {
  TokenizerSpec spec;
  spec.model = "llama";
  const auto add = [&](std::string text, TokenType type, float score) {
    spec.tokens.push_back(std::move(text));
    spec.types.push_back(type);
    spec.scores.push_back(score);
    return static_cast<int32_t>(spec.tokens.size() - 1);
  };
  add("<unk>", TokenType::kControl, 0);  // 0
  add("<bos>", TokenType::kControl, 0);  // 1
  add("<eos>", TokenType::kControl, 0);  // 2
  for (int b = 0; b < 256; ++b) {        // 3..258
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    add(name, TokenType::kByte, 0);
  }
  add(kSp, TokenType::kNormal, -10);                     // 259
  add("a", TokenType::kNormal, -10);                     // 260
  add("b", TokenType::kNormal, -10);                     // 261
  add("ab", TokenType::kNormal, -1);                     // 262
  add(std::string(kSp) + "a", TokenType::kNormal, -2);   // 263
  add(std::string(kSp) + "ab", TokenType::kNormal, -3);  // 264
  add("\n", TokenType::kUserDefined, 0);                 // 265
  add("  ", TokenType::kUserDefined, 0);                 // 266: stored with real spaces
  add("<turn>", TokenType::kControl, 0);                 // 267
  spec.bos_id = 1;
  spec.eos_id = 2;
  spec.unk_id = 0;
  spec.add_bos = true;
  return spec;
}

TEST(SentencePieceTokenizerTest, HighestScoreFirstLeftmostOnTies) {
  auto t = Tokenizer::Create(SentencePieceSpec());
  // "ab ab" -> a b ▁ a b: both "ab" (score -1) beat "▁a" (-2); the left one merges first,
  // then ▁ + ab -> "▁ab" (-3).
  EXPECT_EQ(t->Encode("ab ab"), (Ids{1, 262, 264}));
  EXPECT_EQ(t->Encode("ab ab", /*add_special=*/false), (Ids{262, 264}));
  EXPECT_EQ(t->Encode(" a"), (Ids{1, 263}));  // no dummy prefix
}

TEST(SentencePieceTokenizerTest, ByteFallbackAndDecode) {
  auto t = Tokenizer::Create(SentencePieceSpec());
  const Ids ids = t->Encode("a\xC3\xA9", false);  // 'é' is not in the vocabulary
  EXPECT_EQ(ids, (Ids{260, 3 + 0xC3, 3 + 0xA9}));
  EXPECT_EQ(t->TokenPiece(3 + 0xC3), "\xC3");
  EXPECT_EQ(t->Decode(ids), "a\xC3\xA9");
  EXPECT_EQ(t->Decode(Ids{264, 259, 260}), " ab a");
  EXPECT_EQ(t->Decode(Ids{1, 260}), "a");
  EXPECT_EQ(t->Decode(Ids{1, 260}, true), "<bos>a");
}

TEST(SentencePieceTokenizerTest, StreamReleasesWholeCharacters) {
  auto t = Tokenizer::Create(SentencePieceSpec());
  const Ids ids = t->Encode("ab \xC3\xA9!", true);  // BOS, ab, ▁, <0xC3>, <0xA9>, <0x21>
  ASSERT_EQ(ids, (Ids{1, 262, 259, 3 + 0xC3, 3 + 0xA9, 3 + '!'}));
  TokenTextStream stream(*t);
  std::vector<std::string> out;
  for (int32_t id : ids) out.push_back(stream.Push(id));
  EXPECT_EQ(out, (std::vector<std::string>{"", "ab", " ", "", "\xC3\xA9", "!"}));
  EXPECT_EQ(stream.Flush(), "");
  TokenTextStream cut(*t);
  EXPECT_EQ(cut.Push(3 + 0xC3), "");
  EXPECT_EQ(cut.Flush(), kFffd);
}

TEST(SentencePieceTokenizerTest, UserDefinedAlwaysControlWhenParsing) {
  auto t = Tokenizer::Create(SentencePieceSpec());
  // "\n" and "  " are cut out whatever parse_special says; "<turn>" only when parsing.
  EXPECT_EQ(t->Encode("a\nb  a", false), (Ids{260, 265, 261, 266, 260}));
  EXPECT_EQ(t->Encode("a<turn>b", false, true), (Ids{260, 267, 261}));
  const Ids plain = t->Encode("<turn>", false, false);
  EXPECT_EQ(plain.size(), 6u);  // six byte-fallback tokens
  EXPECT_EQ(t->Decode(plain), "<turn>");
  EXPECT_EQ(t->Decode(Ids{266}), "  ");
}

TEST(SentencePieceTokenizerTest, SpaceRunSpelledWithBlocks) {
  // A literal "▁▁" in text reaches BPE and merges into the whitespace-run token, as it does
  // in SentencePiece (where that token is spelled "▁▁").
  auto t = Tokenizer::Create(SentencePieceSpec());
  EXPECT_EQ(t->Encode(std::string(kSp) + kSp, false), (Ids{266}));
}

TEST(SentencePieceTokenizerTest, DummyPrefixWhenAsked) {
  TokenizerSpec spec = SentencePieceSpec();
  spec.add_space_prefix = true;
  auto t = Tokenizer::Create(spec);
  EXPECT_EQ(t->Encode("ab", false), (Ids{264}));
}

TEST(SentencePieceTokenizerTest, RejectsBadSpecs) {
  TokenizerSpec spec = SentencePieceSpec();
  spec.scores.pop_back();
  EXPECT_THROW(Tokenizer::Create(spec), InvalidArgument);
  spec = SentencePieceSpec();
  spec.tokens[3] = "<0xZZ>";
  EXPECT_THROW(Tokenizer::Create(spec), InvalidArgument);
  spec = SentencePieceSpec();
  spec.types[5] = static_cast<TokenType>(9);
  EXPECT_THROW(Tokenizer::Create(spec), InvalidArgument);
}

TEST(TokenizerGgufTest, ReadsMetadata) {
  // A SentencePiece vocabulary in GGUF metadata: -1 (i32) means "no such token"; absent
  // add_bos / add_space_prefix take llama.cpp's SentencePiece defaults (both on).
  const TokenizerSpec want = SentencePieceSpec();
  std::vector<int32_t> types;
  for (TokenType t : want.types) types.push_back(static_cast<int32_t>(t));
  GgufBuilder b;
  b.KvString("tokenizer.ggml.model", "llama")
      .KvStringArray("tokenizer.ggml.tokens", want.tokens)
      .KvArray("tokenizer.ggml.scores", kGF32, want.scores)
      .KvArray("tokenizer.ggml.token_type", kGI32, types)
      .KvU32("tokenizer.ggml.bos_token_id", 1)
      .KvI32("tokenizer.ggml.eos_token_id", 2)
      .KvI32("tokenizer.ggml.padding_token_id", -1)
      .KvI32("tokenizer.ggml.unknown_token_id", -1);
  const std::vector<uint8_t> bytes = b.Build();
  const GgufFile f = GgufFile::Parse(bytes);
  const TokenizerSpec spec = TokenizerSpec::FromGguf(f);
  EXPECT_EQ(spec.tokens, want.tokens);
  EXPECT_EQ(spec.types, want.types);
  EXPECT_EQ(spec.bos_id, 1);
  EXPECT_EQ(spec.eos_id, 2);
  EXPECT_FALSE(spec.unk_id);
  EXPECT_TRUE(spec.add_bos);
  EXPECT_TRUE(spec.add_space_prefix);
  auto tok = Tokenizer::FromGguf(f);
  EXPECT_EQ(tok->Encode("ab"), (Ids{1, 264}));  // BOS, "▁ab" with the dummy prefix
}

TEST(TokenizerGgufTest, MalformedMetadataThrows) {
  GgufBuilder no_model;
  no_model.KvStringArray("tokenizer.ggml.tokens", {"a"});
  const std::vector<uint8_t> b1 = no_model.Build();
  EXPECT_THROW(Tokenizer::FromGguf(GgufFile::Parse(b1)), ModelFormatError);
  GgufBuilder no_scores;
  no_scores.KvString("tokenizer.ggml.model", "llama").KvStringArray("tokenizer.ggml.tokens", {"a"});
  const std::vector<uint8_t> b2 = no_scores.Build();
  try {
    Tokenizer::FromGguf(GgufFile::Parse(b2, "two.gguf"));
    FAIL() << "no exception";
  } catch (const ModelFormatError& e) {
    EXPECT_NE(std::string(e.what()).find("two.gguf: SentencePiece tokenizer has 0 scores"),
              std::string::npos)
        << e.what();
  }
}

// ---- chat templates ----------------------------------------------------------------------

// SmolLM2-135M-Instruct's template as its GGUF stores it.
constexpr const char* kSmolLmTemplate =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|im_start|>assistant\n' }}{% endif %}";

TEST(ChatTemplateTest, ChatMlWithDefaultSystem) {
  const ChatTemplate t = ChatTemplate::FromJinja(kSmolLmTemplate);
  EXPECT_EQ(t.format(), ChatTemplate::Format::kChatMl);
  const std::vector<ChatMessage> user = {{"user", "Hi!"}};
  EXPECT_EQ(t.Apply(user, true),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by "
            "Hugging Face<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n");
  const std::vector<ChatMessage> with_system = {
      {"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello."}};
  EXPECT_EQ(t.Apply(with_system, false),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello.<|im_end|>\n");
}

TEST(ChatTemplateTest, Gemma) {
  const ChatTemplate t(ChatTemplate::Format::kGemma);
  const std::vector<ChatMessage> m = {
      {"system", "Be brief."}, {"user", " Hi \n"}, {"assistant", "Hello."}, {"user", "Bye"}};
  EXPECT_EQ(t.Apply(m, true),
            "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n"
            "<start_of_turn>model\nHello.<end_of_turn>\n"
            "<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n");
  const std::vector<ChatMessage> late_system = {{"user", "a"}, {"system", "b"}};
  EXPECT_THROW(t.Apply(late_system, true), InvalidArgument);
}

TEST(ChatTemplateTest, RejectsUnknownRolesAndTemplates) {
  const ChatTemplate t(ChatTemplate::Format::kChatMl);
  const std::vector<ChatMessage> m = {{"tool", "x"}};
  EXPECT_THROW(t.Apply(m, true), InvalidArgument);
  EXPECT_THROW(ChatTemplate::FromJinja("{{ messages }}"), InvalidArgument);
}

TEST(ChatTemplateTest, FromVocabularyWithoutTemplate) {
  TokenizerSpec spec = SentencePieceSpec();
  spec.tokens.push_back("<start_of_turn>");
  spec.tokens.push_back("<end_of_turn>");
  for (int i = 0; i < 2; ++i) {
    spec.types.push_back(TokenType::kControl);
    spec.scores.push_back(0);
  }
  auto tok = Tokenizer::Create(spec);
  EXPECT_EQ(ChatTemplate::ForTokenizer(*tok).format(), ChatTemplate::Format::kGemma);
  auto plain = Tokenizer::Create(SentencePieceSpec());
  EXPECT_THROW(ChatTemplate::ForTokenizer(*plain), InvalidArgument);
}

}  // namespace
}  // namespace rpa
