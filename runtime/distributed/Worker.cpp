#include "runtime/distributed/Worker.h"

#include <fmt/format.h>

#include <ostream>

#include "runtime/distributed/Messages.h"
#include "runtime/distributed/TrainingJob.h"
#include "runtime/reference/SerialExecutor.h"

namespace meshflow::runtime {
namespace {

using nlohmann::json;

std::string_view bytesOf(const json& binary) {
  const auto& bytes = binary.get_binary();
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

// One job: the trainer of this process's device and the data it reads.
struct Job {
  TrainingJob description;
  std::unique_ptr<DataSource> data;
  std::unique_ptr<ParallelTrainer> trainer;
};

class Worker {
 public:
  explicit Worker(ProcessGroup& group) : group_(group) {}

  void noteFailure() { failed_ = true; }

  /// A command failed here: the controller's next word (exit) is awaited
  /// even after the abort, at most this long.
  std::optional<std::chrono::milliseconds> lastWordWait() const {
    if (!failed_) return std::nullopt;
    return (job_ ? job_->description.options.timeout : std::chrono::minutes(5)) + std::chrono::seconds(30);
  }

  // Carries out one command; returns the exit code when it is `exit`.
  std::optional<int> serve(const json& command) {
    const std::string name = command.at("command").get<std::string>();
    if (name == "exit") return command.value("code", 0);
    if (name == "end") {
      job_.reset();
      return std::nullopt;
    }
    json reply;
    try {
      reply = distributed::okReply(carryOut(name, command));
    } catch (const ParallelRunError& e) {
      reply = distributed::errorReply(e.what(), e.aborted());
      failed_ = true;
    } catch (const std::exception& e) {
      const std::string message = fmt::format("rank {}: {}", group_.rank(), e.what());
      group_.abort(message);
      reply = distributed::errorReply(message, false);
      failed_ = true;
    }
    group_.send(0, distributed::encode(reply));
    return std::nullopt;
  }

 private:
  json carryOut(const std::string& name, const json& command) {
    if (name == "job") {
      job_.reset();
      auto job = std::make_unique<Job>();
      job->description = decodeJob(bytesOf(command.at("job")));
      job->data = dataFromRecipe(job->description.data);
      const TrainingJob& d = job->description;
      job->trainer = std::make_unique<ParallelTrainer>(d.training, d.plan, d.options, jobHost(group_, d));
      job_ = std::move(job);
      return json::object();
    }
    if (!job_) throw ParallelRunError(fmt::format("rank {}: '{}' before any job", group_.rank(), name));
    ParallelTrainer& trainer = *job_->trainer;
    if (name == "set_state") {
      trainer.setState(decodeTensors(bytesOf(command.at("tensors"))));
      return json::object();
    }
    if (name == "init_state") {
      trainer.setState(parameterInitializer(job_->description.training.graph, command.at("seed").get<std::uint64_t>()));
      return json::object();
    }
    if (name == "step") {
      const std::int64_t step = command.at("step").get<std::int64_t>();
      const TrainingJob& d = job_->description;
      TensorMap batch = job_->data->batch(d.training.graph, d.options.batch, step - 1);
      return distributed::stepReport(trainer.step(batch, step), group_.rank());
    }
    if (name == "state") {
      const std::string tensors = encodeTensors(trainer.deviceState(group_.rank()));
      return {{"tensors", json::binary({tensors.begin(), tensors.end()})}};
    }
    if (name == "checkpoint") {
      json files = json::array();
      for (const DeviceShard& shard : trainer.shards(true)) {
        WrittenShardFile written = writeShardFile(command.at("directory").get<std::string>(), shard);
        json tensors = json::array();
        for (const auto& [tensor, type] : written.tensors)
          tensors.push_back({tensor, ir::dtypeName(type.first), type.second});
        files.push_back({{"name", written.name}, {"bytes", written.bytes}, {"checksum", written.checksum},
                         {"tensors", tensors}});
      }
      return {{"files", files}};
    }
    throw ParallelRunError(fmt::format("rank {}: unknown command '{}'", group_.rank(), name));
  }

  ProcessGroup& group_;
  std::unique_ptr<Job> job_;
  bool failed_ = false;
};

}  // namespace

void releaseWorkers(ProcessGroup& group, int code, const std::string& message) {
  const std::string bytes = distributed::encode({{"command", "exit"}, {"code", code}, {"message", message}});
  for (int w = 1; w < group.size(); ++w) {
    try {
      group.send(w, bytes);
    } catch (const CommError&) {
      // A worker that cannot be told has stopped already.
    }
  }
}

int runWorker(ProcessGroup& group, std::ostream& err) {
  Worker worker(group);
  try {
    for (;;) {
      const auto wait = worker.lastWordWait();
      std::string bytes;
      try {
        bytes = group.recv(0, wait, wait.has_value());
      } catch (const CommError& e) {
        // A rank failed before this one's next command came: the controller
        // still sends it (and its last word), which it answers as failed.
        if (e.kind() != CommError::Kind::Aborted || wait) throw;
        worker.noteFailure();
        continue;
      }
      json command = distributed::decode(bytes);
      if (auto code = worker.serve(command)) {
        if (*code != 0 && command.contains("message"))
          err << fmt::format("rank {}: the controller stopped: {}\n", group.rank(),
                             command["message"].get<std::string>());
        return *code;
      }
    }
  } catch (const CommError& e) {
    // "... aborted: rank 2 failed: ..." says it all from "rank 2" on.
    const std::string& detail = e.detail();
    const auto cause = detail.find("aborted: ");
    if (e.kind() == CommError::Kind::Aborted && cause != std::string::npos)
      err << fmt::format("rank {}: stopped: {}\n", group.rank(), detail.substr(cause + 9));
    else
      err << fmt::format("rank {}: {}\n", group.rank(), detail);
  } catch (const std::exception& e) {
    err << fmt::format("rank {}: {}\n", group.rank(), e.what());
    group.abort(e.what());
  }
  return 1;
}

}  // namespace meshflow::runtime
