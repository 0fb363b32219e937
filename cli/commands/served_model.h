// One opened engine made ready for the HTTP routes: a scheduler over a
// context of its own for a generation model, an embedder for an embedding
// model, and the LoadedModel the routes read. The one-model server and every
// model of --models-dir are made by make_served_model.
#pragma once

#include <memory>
#include <string>

#include "chat_prompt.h"
#include "embedder.h"
#include "ferrox/config.h"
#include "ferrox/engine.h"
#include "ferrox/expected.h"
#include "metrics.h"
#include "model_session.h"
#include "openai_api.h"
#include "scheduler.h"

namespace ferrox::cli {

// How `serve` opens an engine: its settings, and every model kind (an
// embedding model serves /v1/embeddings).
ModelChoices serve_model_choices(const ServerConfig& s, unsigned threads);

class ServedModel {
  public:
    ServedModel() = default;
    ~ServedModel() { stop(); }
    ServedModel(const ServedModel&) = delete;
    ServedModel& operator=(const ServedModel&) = delete;

    const server::LoadedModel& api() const { return loaded_; }
    // The line `serve` logs once the model is ready.
    const std::string& summary() const { return summary_; }
    void begin_drain();
    bool wait_idle(server::Clock::time_point deadline);
    void stop();

  private:
    friend Expected<std::unique_ptr<ServedModel>> make_served_model(
        const Engine&, const ServerConfig&, const std::string&, server::Metrics&,
        server::LoadGauges*, const Engine*);
    std::unique_ptr<ChatRenderer> renderer_;
    std::unique_ptr<server::Scheduler> scheduler_;
    std::unique_ptr<server::Embedder> embedder_;
    server::LoadedModel loaded_;
    std::string summary_;
};

// The engine `e` (which must outlive the result) served with the server
// settings `s`; chat_template: --chat-template's value ("" the file's).
// `gauges`: where its scheduler's gauges go (a model of many; it must outlive
// the result); null: the Metrics' own. `draft` (server.model_draft, which
// must outlive the result too): the model that drafts for speculation,
// refused when its vocabulary is not e's or it is recurrent; null: n-gram
// prompt lookup.
Expected<std::unique_ptr<ServedModel>> make_served_model(const Engine& e, const ServerConfig& s,
                                                         const std::string& chat_template,
                                                         server::Metrics& metrics,
                                                         server::LoadGauges* gauges = nullptr,
                                                         const Engine* draft = nullptr);

}  // namespace ferrox::cli
