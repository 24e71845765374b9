// rpa.Tokenizer: the tokenizer of a GGUF model file (model/tokenizer.h) and its chat
// prompt format (model/chat_template.h).
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <vector>

#include "model/chat_template.h"
#include "model/gguf.h"
#include "model/tokenizer.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace rpa::python {
namespace {

std::unique_ptr<Tokenizer> Open(const std::string& path) {
  py::gil_scoped_release release;
  return Tokenizer::FromGguf(GgufFile::Open(path));
}

std::vector<int32_t> Encode(const Tokenizer& t, const std::string& text, bool add_special,
                            bool parse_special) {
  py::gil_scoped_release release;
  return t.Encode(text, add_special, parse_special);
}

std::vector<std::vector<int32_t>> EncodeBatch(const Tokenizer& t,
                                              const std::vector<std::string>& texts,
                                              bool add_special, bool parse_special) {
  py::gil_scoped_release release;
  std::vector<std::vector<int32_t>> out;
  out.reserve(texts.size());
  for (const std::string& text : texts) out.push_back(t.Encode(text, add_special, parse_special));
  return out;
}

// messages: dicts with "role" and "content", as Hugging Face's apply_chat_template takes.
std::string ApplyChatTemplate(const Tokenizer& t, const py::list& messages,
                              bool add_generation_prompt) {
  std::vector<ChatMessage> ms;
  for (const py::handle& m : messages) {
    ms.push_back({m["role"].cast<std::string>(), m["content"].cast<std::string>()});
  }
  return ChatTemplate::ForTokenizer(t).Apply(ms, add_generation_prompt);
}

std::optional<int32_t> OptionalId(const std::optional<int32_t>& id) { return id; }

}  // namespace

void BindTokenizer(py::module_& m) {
  py::class_<Tokenizer>(m, "Tokenizer", R"doc(The tokenizer a GGUF model file describes.

Byte-level BPE (tokenizer.ggml.model "gpt2", e.g. SmolLM2) or SentencePiece-style BPE
("llama", e.g. Gemma 3). Raises ValueError on a malformed file or unsupported tokenizer.)doc")
      .def(py::init(&Open), py::arg("path"))
      .def("encode", &Encode, py::arg("text"), py::kw_only(), py::arg("add_special") = true,
           py::arg("parse_special") = false,
           R"doc(Token ids of `text`. add_special adds BOS/EOS as the model asks; parse_special
turns control tokens written in the text (e.g. "<|im_start|>") into their ids.)doc")
      .def("encode_batch", &EncodeBatch, py::arg("texts"), py::kw_only(),
           py::arg("add_special") = true, py::arg("parse_special") = false,
           "encode() of each text, without the GIL.")
      .def(
          "decode",
          [](const Tokenizer& t, const std::vector<int32_t>& ids, bool render_special) {
            return t.Decode(ids, render_special);
          },
          py::arg("ids"), py::kw_only(), py::arg("render_special") = false,
          "Text of `ids`; control tokens appear iff render_special.")
      .def(
          "token_piece",
          [](const Tokenizer& t, int32_t id, bool render_special) {
            return py::bytes(t.TokenPiece(id, render_special));
          },
          py::arg("id"), py::kw_only(), py::arg("render_special") = false,
          "Raw bytes of one token (may be part of a UTF-8 character).")
      .def("apply_chat_template", &ApplyChatTemplate, py::arg("messages"), py::kw_only(),
           py::arg("add_generation_prompt") = true,
           "Prompt text of [{'role': ..., 'content': ...}, ...] in the model's chat format.")
      .def_property_readonly("vocab_size", &Tokenizer::vocab_size)
      .def_property_readonly("bos_id", [](const Tokenizer& t) { return OptionalId(t.bos_id()); })
      .def_property_readonly("eos_id", [](const Tokenizer& t) { return OptionalId(t.eos_id()); })
      .def_property_readonly("add_bos", &Tokenizer::add_bos)
      .def_property_readonly("model", &Tokenizer::model)
      .def_property_readonly("chat_template", &Tokenizer::chat_template);
}

}  // namespace rpa::python
