#include "model/chat_template.h"

#include "model/tokenizer.h"
#include "util/error.h"

namespace rpa {
namespace {

constexpr std::string_view kImStart = "<|im_start|>";
constexpr std::string_view kImEnd = "<|im_end|>";
constexpr std::string_view kTurnStart = "<start_of_turn>";
constexpr std::string_view kTurnEnd = "<end_of_turn>";

void CheckRole(const ChatMessage& m) {
  if (m.role != "system" && m.role != "user" && m.role != "assistant") {
    throw InvalidArgument(
        Concat("chat message role '", m.role, "' is not one of system, user, assistant"));
  }
}

std::string_view Strip(std::string_view s) {
  const auto ws = " \t\n\r\f\v";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(ws) + 1 - b);
}

// The literal `<|im_start|>system\n...<|im_end|>` a ChatML template writes when the first
// message is not a system message (SmolLM2's "You are a helpful AI assistant named
// SmolLM..."), or "" when it writes none. The template is Jinja source: the message sits in
// a string literal, where a newline may be written as the escape "\n".
std::string DefaultSystem(std::string_view jinja) {
  if (jinja.find("!= 'system'") == std::string_view::npos &&
      jinja.find("!= \"system\"") == std::string_view::npos) {
    return "";
  }
  for (std::string_view open :
       {std::string_view("<|im_start|>system\n"), std::string_view("<|im_start|>system\\n")}) {
    const size_t b = jinja.find(open);
    if (b == std::string_view::npos) continue;
    const size_t e = jinja.find(kImEnd, b + open.size());
    if (e == std::string_view::npos) return "";
    std::string text;
    const std::string_view raw = jinja.substr(b + open.size(), e - b - open.size());
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] == '\\' && i + 1 < raw.size() && raw[i + 1] == 'n') {
        text.push_back('\n');
        ++i;
      } else {
        text.push_back(raw[i]);
      }
    }
    return text;
  }
  return "";
}

}  // namespace

ChatTemplate ChatTemplate::FromJinja(std::string_view jinja) {
  if (jinja.find(kImStart) != std::string_view::npos) {
    return ChatTemplate(Format::kChatMl, DefaultSystem(jinja));
  }
  if (jinja.find(kTurnStart) != std::string_view::npos) return ChatTemplate(Format::kGemma);
  throw InvalidArgument(Concat("chat template is neither ChatML (", kImStart, ") nor Gemma (",
                               kTurnStart, "): '", jinja.substr(0, 80), "...'"));
}

ChatTemplate ChatTemplate::ForTokenizer(const Tokenizer& tokenizer) {
  if (!tokenizer.chat_template().empty()) return FromJinja(tokenizer.chat_template());
  // Base models ship no template; their vocabulary still tells the turn markers.
  if (tokenizer.FindToken(kImStart) && tokenizer.FindToken(kImEnd)) {
    return ChatTemplate(Format::kChatMl);
  }
  if (tokenizer.FindToken(kTurnStart) && tokenizer.FindToken(kTurnEnd)) {
    return ChatTemplate(Format::kGemma);
  }
  throw InvalidArgument(
      "model has no chat template and no ChatML or Gemma turn tokens in its vocabulary");
}

std::string ChatTemplate::Apply(std::span<const ChatMessage> messages,
                                bool add_generation_prompt) const {
  for (const ChatMessage& m : messages) CheckRole(m);
  std::string out;
  if (format_ == Format::kChatMl) {
    if (!default_system_.empty() && !messages.empty() && messages[0].role != "system") {
      out.append(kImStart).append("system\n").append(default_system_).append(kImEnd).append("\n");
    }
    for (const ChatMessage& m : messages) {
      out.append(kImStart).append(m.role).append("\n").append(m.content).append(kImEnd).append(
          "\n");
    }
    if (add_generation_prompt) out.append(kImStart).append("assistant\n");
    return out;
  }
  std::string system_prefix;
  size_t first = 0;
  if (!messages.empty() && messages[0].role == "system") {
    system_prefix = messages[0].content + "\n\n";
    first = 1;
  }
  for (size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "system") {
      throw InvalidArgument(Concat("Gemma chat: system message at position ", i,
                                   "; only the first message may be a system message"));
    }
    out.append(kTurnStart).append(m.role == "assistant" ? "model" : "user").append("\n");
    if (i == first) out.append(system_prefix);
    out.append(Strip(m.content)).append(kTurnEnd).append("\n");
  }
  if (add_generation_prompt) out.append(kTurnStart).append("model\n");
  return out;
}

}  // namespace rpa
