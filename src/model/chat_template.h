// Chat prompts for instruct models: a small formatter for the two formats rpa's models use,
// chosen from the tokenizer's Jinja template (`tokenizer.chat_template`) by its markers. It
// is not a Jinja engine; it reproduces what those templates render.
//
//   ChatML (SmolLM2-Instruct):  <|im_start|>{role}\n{content}<|im_end|>\n ...
//                               then "<|im_start|>assistant\n" as the generation prompt.
//                               When the first message is not a system message, a template
//                               that says so inserts its default system message first.
//   Gemma:                      <start_of_turn>{user|model}\n{content}<end_of_turn>\n ...
//                               then "<start_of_turn>model\n"; a system message is prefixed
//                               to the first user turn; turn contents are stripped of
//                               surrounding whitespace. BOS is not written: Encode(add_special)
//                               adds it.
//
// Encode the result with add_special = true and parse_special = true.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace rpa {

class Tokenizer;

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

class ChatTemplate {
 public:
  enum class Format { kChatMl, kGemma };

  // The format the tokenizer's template (or, without one, its vocabulary) describes.
  // Throws rpa::InvalidArgument when neither shows a format rpa knows.
  static ChatTemplate ForTokenizer(const Tokenizer& tokenizer);
  // The format of a Jinja chat template by its markers, with ChatML's default system message
  // taken from the template. Throws rpa::InvalidArgument when it has neither marker.
  static ChatTemplate FromJinja(std::string_view jinja);

  explicit ChatTemplate(Format format, std::string default_system = "")
      : format_(format), default_system_(std::move(default_system)) {}

  // The prompt text of `messages`, ending with the assistant's turn opener iff
  // add_generation_prompt. Throws rpa::InvalidArgument on a role other than system, user,
  // assistant, or (Gemma) a system message that is not first.
  std::string Apply(std::span<const ChatMessage> messages, bool add_generation_prompt) const;

  Format format() const { return format_; }
  const std::string& default_system() const { return default_system_; }

 private:
  Format format_;
  std::string default_system_;  // ChatML: inserted when the first message is not "system"
};

}  // namespace rpa
