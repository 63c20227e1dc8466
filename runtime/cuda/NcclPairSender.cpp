#include "runtime/cuda/NcclPairSender.h"

#include <fmt/format.h>

#include <chrono>
#include <exception>
#include <utility>

#include "runtime/cuda/NcclComm.h"

namespace meshflow::runtime::cuda {

struct NcclPairSender::State {
  NcclPairOptions options;
  NcclId id;
  std::mutex mutex;
  std::condition_variable changed;
  struct Outgoing {
    std::vector<Tensor> message;
    std::vector<const void*> data;
  };
  std::deque<Outgoing> queue;
  std::vector<std::vector<Tensor>> sent;
  bool stop = false;
  bool joined = false;  // the thread is past ncclCommInitRank
  std::string error;    // why the channel failed, once it has

  void run();
  void sendOne(NcclComm& comm, NcclStream stream, const Outgoing& out);
};

namespace {
// A sent message waits for its peer's receive as long as the run goes on.
constexpr std::chrono::hours kNoTimeout{24 * 365};
}  // namespace

void NcclPairSender::State::sendOne(NcclComm& comm, NcclStream stream, const Outgoing& out) {
  const NcclCalls& calls = options.calls;
  comm.checkEnqueued(calls.groupStart(), options.what + " (ncclGroupStart)");
  for (std::size_t i = 0; i < out.message.size(); ++i)
    if (out.data[i])
      comm.checkEnqueued(
          calls.send(out.data[i], static_cast<std::size_t>(out.message[i].elements()),
                     out.message[i].dtype(), 1, comm.handle(), stream),
          options.what);
  comm.checkEnqueued(calls.groupEnd(), options.what + " (ncclGroupEnd)");
  comm.wait(
      [&] {
        bool stopping;
        {
          std::lock_guard lock(mutex);
          stopping = stop;
        }
        if (stopping || (options.stopped && options.stopped()))
          comm.abort(
              options.what +
              ": a send was abandoned (the run ended or stopped before the peer received it)");
        return calls.streamDone(stream);
      },
      std::chrono::duration_cast<std::chrono::milliseconds>(kNoTimeout), options.what);
}

void NcclPairSender::State::run() {
  NcclStream stream = nullptr;
  try {
    if (options.prepareThread) options.prepareThread();
    stream = options.calls.makeStream();
    NcclComm comm(options.calls, id, 0, 2);
    {
      std::lock_guard lock(mutex);
      joined = true;
    }
    for (;;) {
      std::unique_lock lock(mutex);
      changed.wait(lock, [&] { return stop || !queue.empty(); });
      if (queue.empty()) break;  // stopping with nothing left to send
      Outgoing out = std::move(queue.front());
      queue.pop_front();
      lock.unlock();
      std::exception_ptr failure;
      try {
        sendOne(comm, stream, out);
      } catch (...) {
        failure = std::current_exception();
      }
      lock.lock();
      sent.push_back(std::move(out.message));  // released on the caller's thread, sent or not
      if (failure) std::rethrow_exception(failure);
    }
  } catch (const std::exception& e) {
    std::lock_guard lock(mutex);
    error = e.what();
  }
  if (stream) options.calls.destroyStream(stream);
}

NcclPairSender::NcclPairSender(NcclPairOptions options, const NcclId& id)
    : state_(std::make_shared<State>()) {
  state_->options = std::move(options);
  state_->id = id;
  thread_ = std::thread([state = state_] { state->run(); });
}

NcclPairSender::~NcclPairSender() {
  bool joined;
  {
    std::lock_guard lock(state_->mutex);
    state_->stop = true;
    joined = state_->joined || !state_->error.empty();
    state_->changed.notify_all();
  }
  // Unsent messages are dropped here, on the caller's thread.
  if (joined) {
    thread_.join();
  } else {
    thread_.detach();  // blocked in ncclCommInitRank: the state stays alive with it
  }
  std::lock_guard lock(state_->mutex);
  state_->queue.clear();
  state_->sent.clear();
}

void NcclPairSender::post(std::vector<Tensor> message, std::vector<const void*> data) {
  std::lock_guard lock(state_->mutex);
  if (!state_->error.empty()) throw NcclError(state_->options.what + " failed: " + state_->error);
  state_->queue.push_back({std::move(message), std::move(data)});
  state_->changed.notify_all();
}

std::vector<std::vector<Tensor>> NcclPairSender::takeSent() {
  std::lock_guard lock(state_->mutex);
  return std::exchange(state_->sent, {});
}

}  // namespace meshflow::runtime::cuda
