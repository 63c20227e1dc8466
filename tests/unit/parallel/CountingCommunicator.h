// A Communicator that forwards every call to another and counts the
// collectives by kind, so a test can tell an all-to-all from an all-gather.
#pragma once

#include <atomic>

#include "runtime/Communicator.h"

namespace meshflow::parallel_test {

struct CollectiveCounts {
  std::atomic<int> allToAll{0}, allGather{0}, allReduce{0}, reduceScatter{0};
};

class CountingCommunicator : public runtime::Communicator {
 public:
  CountingCommunicator(runtime::Communicator& inner, CollectiveCounts& counts)
      : inner_(inner), counts_(counts) {}

  int device() const override { return inner_.device(); }
  int deviceCount() const override { return inner_.deviceCount(); }
  void send(int peer, std::uint64_t tag, std::vector<runtime::Tensor> message) override {
    inner_.send(peer, tag, std::move(message));
  }
  std::vector<runtime::Tensor> recv(int peer, std::uint64_t tag) override {
    return inner_.recv(peer, tag);
  }
  void allReduce(const std::vector<int>& group, std::vector<runtime::Tensor*> tensors) override {
    ++counts_.allReduce;
    inner_.allReduce(group, std::move(tensors));
  }
  void allGather(const std::vector<int>& group, const runtime::Tensor& input,
                 runtime::Tensor& output) override {
    ++counts_.allGather;
    inner_.allGather(group, input, output);
  }
  void reduceScatter(const std::vector<int>& group, const runtime::Tensor& input,
                     runtime::Tensor& output) override {
    ++counts_.reduceScatter;
    inner_.reduceScatter(group, input, output);
  }
  void allToAll(const std::vector<int>& group, const runtime::Tensor& input,
                runtime::Tensor& output) override {
    ++counts_.allToAll;
    inner_.allToAll(group, input, output);
  }
  void broadcast(const std::vector<int>& group, int root, runtime::Tensor& tensor) override {
    inner_.broadcast(group, root, tensor);
  }
  void barrier(const std::vector<int>& group) override { inner_.barrier(group); }

 private:
  runtime::Communicator& inner_;
  CollectiveCounts& counts_;
};

}  // namespace meshflow::parallel_test
