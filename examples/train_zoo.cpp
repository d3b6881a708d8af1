// The C API from C++: a ResNet-20 from the model zoo, its memory predicted
// on the meta device, then trained for a few steps on random data through
// the library training step, its weights saved as safetensors. revtorch.h
// wraps its declarations in extern "C"; the objects it hands out are owned
// here by std::unique_ptr with the library's destroy functions.
//
// Against an installed revtorch (README, "Install and link"):
//   c++ -std=c++17 train_zoo.cpp $(pkg-config --cflags --libs revtorch) -o train_zoo
//   ./train_zoo [weights.safetensors]
// (the in-tree build does not compile it: the project is C only; the
// install test, tests/install_test.sh, builds and runs it).
#include <revtorch.h>

#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

// Throws with the library's message when a call failed.
void check(rt_status st, const char *what) {
    if (st != RT_OK) throw std::runtime_error(std::string(what) + ": " + rt_error_last());
}

struct model_deleter {
    void operator()(rt_model *m) const { rt_model_destroy(m); }
};
struct optimizer_deleter {
    void operator()(rt_optimizer *o) const { rt_optimizer_destroy(o); }
};
struct tensor_deleter { // a tensor reference
    void operator()(rt_tensor *t) const { rt_tensor_release(t); }
};
using model_ptr = std::unique_ptr<rt_model, model_deleter>;
using optimizer_ptr = std::unique_ptr<rt_optimizer, optimizer_deleter>;
using tensor_ptr = std::unique_ptr<rt_tensor, tensor_deleter>;

model_ptr make_model(rt_device device) {
    rt_model *m = nullptr;
    check(rt_model_create("resnet20", 3, 10, device, /*seed*/ 0, &m), "resnet20");
    return model_ptr(m);
}

optimizer_ptr make_optimizer(const rt_model &m, const rt_optimizer_spec &spec) {
    std::vector<rt_tensor *> params(rt_state_dict_num_params(m.sd));
    rt_state_dict_params(m.sd, params.data(), static_cast<int>(params.size()));
    rt_optimizer *opt = rt_optimizer_create(&spec, params.data(), static_cast<int>(params.size()));
    if (!opt) check(rt_error_last_status(), "optimizer");
    return optimizer_ptr(opt);
}

} // namespace

int main(int argc, char **argv) try {
    const int64_t batch = 8;
    rt_train_config cfg{};
    cfg.accum_steps = 1;

    // The peak of one step at this batch, before allocating anything real:
    // the same step on meta tensors, which book bytes but compute nothing.
    rt_optimizer_spec spec{};
    spec.kind = RT_OPTIM_SGD;
    spec.sgd = rt_sgd_default_opts(0.05);
    spec.sgd.momentum = 0.9;
    int64_t xshape[4] = {batch, 3, 32, 32};
    rt_memstats predicted;
    {
        model_ptr meta = make_model(RT_DEVICE_META);
        check(rt_memory_predict(meta->net, &spec, &cfg, 4, xshape, 1, &batch, RT_I32, &predicted), "prediction");
    }
    std::printf("predicted peak of a step: %.2f MiB (saved activations %.2f MiB)\n",
                predicted.peak_total / 1048576.0, predicted.peak[RT_MEM_SAVED] / 1048576.0);

    model_ptr model = make_model(RT_DEVICE_CPU);
    optimizer_ptr opt = make_optimizer(*model, spec);
    tensor_ptr x(rt_tensor_create(4, xshape, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA));
    tensor_ptr y(rt_tensor_create(1, &batch, RT_I32, RT_DEVICE_CPU, RT_MEM_DATA));
    if (!x || !y) check(rt_error_last_status(), "batch");
    rt_generator gen{1, 0};
    rt_generator_normal(&gen, rt_tensor_numel(x.get()), 0.0f, 1.0f, rt_tensor_f32(x.get()));
    auto *labels = static_cast<int32_t *>(rt_tensor_data(y.get()));
    for (int64_t i = 0; i < batch; i++) labels[i] = static_cast<int32_t>(i % 10);

    for (int step = 0; step < 3; step++) {
        rt_train_result r;
        check(rt_train_step(model->net, opt.get(), &cfg, x.get(), y.get(), &r), "training step");
        std::printf("step %d  loss %.4f\n", step, r.loss);
    }
    if (argc > 1) {
        check(rt_weights_save(model->sd, nullptr, 0, nullptr, 0, argv[1]), "saving the weights");
        std::printf("weights saved to %s\n", argv[1]);
    }
    return 0;
} catch (const std::exception &e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
}
