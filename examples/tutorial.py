# The seed tutorial's code (TVM Relax's training tutorial, as the project's reference copy gives it), run by relax-mlir:
# both the Trainer path and the low-level path, in the tutorial's order, with only the import lines changed and the
# data source replaced (Fashion-MNIST -> scikit-learn's digits, in the marked block below). Lines marked
# "relax-mlir:" are where the tutorial is inconsistent with itself; tests/py/test_tutorial.py
# checks that nothing else differs. `from relax_mlir import tvm` is the facade relax_mlir/tvm.py.
#
#     python examples/tutorial.py

import numpy as np
from relax_mlir import tvm
from relax_mlir.training.loss import CrossEntropyLoss
from relax_mlir.training.setup_trainer import SetupTrainer
from relax_mlir.training.trainer import Trainer
from relax_mlir.tvm import relax
from relax_mlir.script import ir as I, relax as R
from relax_mlir.transform import LegalizeOps
from relax_mlir.training.optimizer import SGD

batch_size = 64

# ---- data source (relax-mlir) ---------------------------------------------------------------------------------
# The tutorial downloads Fashion-MNIST with torchvision; no download is possible here, so scikit-learn's digits
# (shipped with it) stand in: a DataLoader-like class yields (data, target) batches of 64 with drop_last, data
# flattened float32 (the backbone's 784 inputs become 64, the digits' 8x8 pixels), targets one-hot int64 (64, 10)
# to match label_sinfo; both offer .numpy().
from relax_mlir.training.data import load_digits_dataset  # noqa: E402


class DigitsLoader:
    """``torch.utils.data.DataLoader(data, batch_size, shuffle, drop_last=True)`` over digits' training or test part."""

    def __init__(self, images, labels, batch_size, shuffle, seed=0):
        self.dataset = images.reshape(len(images), -1).astype(np.float32)  # len(loader.dataset)
        self.targets = np.eye(10, dtype=np.int64)[labels]  # one-hot int64
        self.batch_size, self.shuffle = batch_size, shuffle
        self.rng = np.random.default_rng(seed)  # shuffle=True: a fixed seed, so the run is deterministic

    def __len__(self):
        return len(self.dataset) // self.batch_size  # drop_last

    def __iter__(self):
        order = self.rng.permutation(len(self.dataset)) if self.shuffle else np.arange(len(self.dataset))
        for i in range(len(self)):
            idx = order[i * self.batch_size:(i + 1) * self.batch_size]
            yield tvm.nd.array(self.dataset[idx]), tvm.nd.array(self.targets[idx])


digits = load_digits_dataset(seed=0)
train_loader = DigitsLoader(digits.x_train, digits.y_train, batch_size, shuffle=True)
test_loader = DigitsLoader(digits.x_test, digits.y_test, batch_size, shuffle=False)
# ---- end of the data source -----------------------------------------------------------------------------------------


@tvm.script.ir_module
class MLP:
    I.module_attrs({"param_num": 6, "state_num": 0})

    @R.function
    def backbone(
        x: R.Tensor((batch_size, 64), "float32"),  # relax-mlir: 784 is Fashion-MNIST's size; digits have 64
        w0: R.Tensor((64, 128), "float32"),  # relax-mlir: 784 -> 64 (the data source's shape)
        b0: R.Tensor((128,), "float32"),
        w1: R.Tensor((128, 128), "float32"),
        b1: R.Tensor((128,), "float32"),
        w2: R.Tensor((128, 10), "float32"),
        b2: R.Tensor((10,), "float32"),
    ) -> R.Tensor((batch_size, 10), "float32"):
        with R.dataflow():
            lv0 = R.matmul(x, w0)
            lv1 = R.add(lv0, b0)
            lv2 = R.nn.relu(lv1)
            lv3 = R.matmul(lv2, w1)
            lv4 = R.add(lv3, b1)
            lv5 = R.nn.relu(lv4)
            lv6 = R.matmul(lv5, w2)
            out = R.add(lv6, b2)
            R.output(out)
        return out


# ---- Method 1: the Trainer API
loss = CrossEntropyLoss(reduction="sum")
opt = SGD(0.01, weight_decay=0.01)

out_sinfo = relax.TensorStructInfo((batch_size, 10), "float32")
label_sinfo = relax.TensorStructInfo((batch_size, 10), "int64")
# relax-mlir: the labels here are one-hot (batch, 10), and the data loader feeds one-hot *float* labels. Accept a
# target of the prediction's shape as class probabilities (as PyTorch's CrossEntropyLoss does), of int or float
# dtype; a target of shape (batch,) holds class indices.
setup_trainer = SetupTrainer(loss, opt, [out_sinfo, label_sinfo])

target = "llvm"
dev = tvm.device(target, 0)
train_mod = setup_trainer(MLP)
ex = tvm.compile(train_mod, target)
vm = relax.VirtualMachine(ex, dev, profile=True)

trainer = Trainer(MLP, 6, setup_trainer)  # relax-mlir: `Backbone` is the module `MLP` above
# build the IRModule in the trainer
trainer.build(target="llvm", device=tvm.cpu(0))  # relax-mlir: "llvm" and "cpu" both mean the host CPU

trainer.xaiver_uniform_init_params()  # sic; relax-mlir: also xavier_uniform_init_params
# trainer.load_params(extern_param_dict: Dict[str, Union[np.ndarray, NDArray]])
# trainer.export_params() -> Dict[str, NDArray]

epochs = 5
log_interval = 200
for epoch in range(epochs):
    for batch_idx, (data, target) in enumerate(train_loader):
        loss = trainer.update_params(data.numpy(), target.numpy())
        if batch_idx % log_interval == 0 or batch_idx == len(train_loader):
            print(f"Train Epoch: {epoch} [{batch_idx * len(data)}/{len(train_loader.dataset)} "
                  f"({100. * batch_idx / len(train_loader):.0f}%)]\tLoss: {loss.numpy():.2f}")
    # relax-mlir: `loss.numpy()` -- the loss returned must offer .numpy() (or be a NumPy scalar/array)

    total, correct = 0, 0
    for data, target in test_loader:
        predict = trainer.predict(data.numpy())  # batch_size * 10
        total += len(data)
        correct += np.sum(predict.numpy().argmax(1) == target.numpy().argmax(1))
    print(f"Train Epoch: {epoch} Accuracy on test dataset: {100.0 * correct / total:.2f}%")


# ---- Method 2: the low-level API
func = CrossEntropyLoss(reduction="sum")(out_sinfo, label_sinfo)
print(func)

Backbone = MLP  # relax-mlir: `Backbone` is the module `MLP` above
Backbone["loss"] = relax.training.utils.append_loss(Backbone["backbone"], func)  # relax-mlir: named `backbone`
# relax-mlir: the function is named `backbone` in the module above; "predict" is what SetupTrainer names it
Backbone.show()

params = Backbone["loss"].params[1:7]  # relax-mlir: params[0] is x; the six parameters are params[1:7]
# relax-mlir: params[0] is x; the six parameters are params[1:7]
Backbone = relax.transform.Gradient(
    Backbone.get_global_var("loss"),
    require_grads=params,
)(Backbone)
# relax-mlir: accept the function's name or its GlobalVar
Backbone.show()

opt = relax.optimizer.SGD(0.1).init(params)
Backbone["SGD"] = opt.get_function()
print(Backbone["SGD"])

# Build and legalize module
lowered_mod = LegalizeOps()(Backbone)
ex = relax.vm.build(lowered_mod, target="llvm")
vm = relax.VirtualMachine(ex, tvm.cpu())


def _get_shape_as_int_list(var):
    return [int(val) for val in var.struct_info.shape]


params_list = [tvm.nd.array(np.ones(_get_shape_as_int_list(i), "float32")) for i in params]
param_input_tuple = tuple(params_list)  # relax-mlir: tuple_object(params_list) is a plain tuple of arrays

x_input, y_input = next(iter(train_loader))
x_input = tvm.nd.array(x_input)
y_input = tvm.nd.array(y_input)
# The input should be (*param_input_tuple, x_input, y_input)
# relax-mlir: the loss function's own parameter order is (x, params..., y); call it in that order

# forward and find the gradient
loss, param_grad_tuple = vm["loss_adjoint"](x_input, *param_input_tuple, y_input)  # relax-mlir: (x, params..., y)
# update parameters
param_input_tuple, opt.state = vm["SGD"](param_input_tuple, param_grad_tuple, opt.state)

print(loss.numpy)
print(len(param_input_tuple), len(param_grad_tuple))
print(param_input_tuple[0])
print(param_grad_tuple[0])
