#include "runtime/distributed/ProcessTrainer.h"

#include <fmt/format.h>

#include "runtime/distributed/Messages.h"
#include "runtime/reference/SerialExecutor.h"

namespace meshflow::runtime {

using nlohmann::json;

namespace {

/// How long, after a failure, the controller waits for each worker's answer:
/// their waits end at the abort, so a healthy worker answers at once.
constexpr std::chrono::milliseconds kAnswerAfterFailure{5000};

}  // namespace

ProcessTrainer::ProcessTrainer(ProcessGroup& group, TrainingJob job) : group_(group), job_(std::move(job)) {
  if (group_.rank() != 0) throw ParallelRunError("only rank 0, the controller, runs a job's controller");
  int devices = job_.options.devices;
  for (const auto& rank : job_.plan.rankDevices)
    for (int d : rank) devices = std::max(devices, d + 1);
  if (devices != group_.size())
    throw ParallelRunError(fmt::format("the plan runs on {} device{}, but the {} backend started {} process{} (one per "
                                       "device: launch with -np {})",
                                       devices, devices == 1 ? "" : "s", group_.backend(), group_.size(),
                                       group_.size() == 1 ? "" : "es", devices));
  job_.options.devices = devices;
  const std::string encoded = encodeJob(job_);
  everywhere({{"command", "job"}, {"job", json::binary({encoded.begin(), encoded.end()})}}, [&] {
    trainer_ = std::make_unique<ParallelTrainer>(job_.training, job_.plan, job_.options, jobHost(group_, job_));
  });
}

ProcessTrainer::~ProcessTrainer() {
  for (int w : workers()) group_.send(w, distributed::encode({{"command", "end"}}));
}

std::vector<int> ProcessTrainer::workers() const {
  std::vector<int> ranks;
  for (int r = 1; r < group_.size(); ++r) ranks.push_back(r);
  return ranks;
}

std::vector<json> ProcessTrainer::everywhere(const json& command, const std::function<void()>& local) {
  if (broken_) throw ParallelRunError("the job stopped at an earlier failure");
  const std::string bytes = distributed::encode(command);
  for (int w : workers()) group_.send(w, bytes);
  std::optional<std::string> failure;
  bool failureAborted = true;
  auto note = [&](const std::string& message, bool aborted) {
    // The first failure that is not another's consequence is the cause.
    if (!failure || (failureAborted && !aborted)) {
      failure = message;
      failureAborted = aborted;
    }
  };
  try {
    local();
  } catch (const ParallelRunError& e) {
    note(e.what(), e.aborted());
  } catch (const std::exception& e) {
    group_.abort(e.what());
    note(e.what(), false);
  }
  // Once this process's part is done every worker answers within the
  // timeout; after a failure within seconds (the others' waits end at the
  // abort). One that does not is stopped, hung or dead.
  std::vector<json> replies;
  std::vector<int> silent;
  for (int w : workers()) {
    json reply = json::object();
    const auto wait = failure ? std::min(job_.options.timeout, kAnswerAfterFailure) : job_.options.timeout;
    try {
      reply = distributed::decode(group_.recv(w, wait, true));
      if (!reply.value("ok", false)) note(reply.value("error", "failed"), reply.value("aborted", false));
    } catch (const CommError&) {
      silent.push_back(w);
    } catch (const JobFormatError& e) {
      note(fmt::format("rank {} answered {}", w, e.what()), false);
    }
    replies.push_back(std::move(reply));
  }
  if (!silent.empty()) {
    std::string ranks;
    for (int w : silent) ranks += (ranks.empty() ? "" : ", ") + std::to_string(w);
    const std::string message =
        fmt::format("rank{} {} did not answer (stopped, hung or dead){}", silent.size() == 1 ? "" : "s", ranks,
                    failure ? "; the first error: " + *failure : "");
    group_.abort(message);
    failure = message;
  }
  if (failure) {
    broken_ = true;
    throw ParallelRunError(*failure);
  }
  return replies;
}

ParallelStepResult ProcessTrainer::step(const TensorMap& batch, std::int64_t step) {
  ParallelStepResult result;
  auto start = std::chrono::steady_clock::now();
  std::vector<json> reports = everywhere({{"command", "step"}, {"step", step}}, [&] { result = trainer_->step(batch, step); });
  std::vector<int> ranks = workers();
  for (std::size_t i = 0; i < ranks.size(); ++i) distributed::addStepReport(result, reports[i], ranks[i]);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.loss = result.losses ? result.lossSum / result.losses : 0;
  return result;
}

void ProcessTrainer::setState(const TensorMap& state) {
  const std::string tensors = encodeTensors(state);
  everywhere({{"command", "set_state"}, {"tensors", json::binary({tensors.begin(), tensors.end()})}},
             [&] { trainer_->setState(state); });
}

void ProcessTrainer::initializeState(std::uint64_t seed) {
  everywhere({{"command", "init_state"}, {"seed", seed}},
             [&] { trainer_->setState(parameterInitializer(job_.training.graph, seed)); });
}

TensorMap ProcessTrainer::state() {
  std::vector<json> replies = everywhere({{"command", "state"}}, [] {});
  std::vector<int> ranks = workers();
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const auto& bytes = replies[i].at("tensors").get_binary();
    trainer_->setDeviceState(ranks[i], decodeTensors({reinterpret_cast<const char*>(bytes.data()), bytes.size()}));
  }
  TensorMap all = trainer_->state();
  for (int r : ranks) trainer_->setDeviceState(r, {});
  return all;
}

std::optional<Tensor> ProcessTrainer::replicatedState(const std::string& name) {
  if (auto here = trainer_->replicatedState(name)) return here;
  TensorMap all = state();
  auto it = all.find(name);
  return it == all.end() ? std::nullopt : std::optional<Tensor>(it->second);
}

void ProcessTrainer::saveCheckpoint(const std::filesystem::path& dir, std::int64_t step, const json& info, int keep) {
  const std::filesystem::path temp = beginCheckpoint(dir, step, info, keep);
  std::vector<WrittenShardFile> files;
  std::vector<json> replies;
  try {
    replies = everywhere({{"command", "checkpoint"}, {"directory", temp.string()}}, [&] {
      for (const DeviceShard& shard : trainer_->shards(true)) files.push_back(writeShardFile(temp, shard));
    });
  } catch (...) {
    abandonCheckpoint(temp);
    throw;
  }
  for (const json& reply : replies)
    for (const json& f : reply.at("files")) {
      WrittenShardFile file{f.at("name").get<std::string>(), f.at("bytes").get<std::uint64_t>(),
                            f.at("checksum").get<std::string>(), {}};
      for (const json& t : f.at("tensors")) {
        auto dtype = ir::parseDType(t.at(1).get<std::string>());
        if (!dtype) throw ParallelRunError("a worker wrote a tensor of an unknown dtype");
        file.tensors.emplace(t.at(0).get<std::string>(), std::pair{*dtype, t.at(2).get<Shape>()});
      }
      files.push_back(std::move(file));
    }
  commitCheckpoint(dir, temp, step, info, files, keep);
}

}  // namespace meshflow::runtime
