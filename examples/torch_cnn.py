"""A small ResNet-style CNN in PyTorch (random weights): `aicc examples/torch_cnn.py`.

aicc exports the module with torch.export, compiles it and compares it with the module's own
eager output.
"""

import torch
from torch import nn

torch.manual_seed(0)


class BasicBlock(nn.Module):
    """conv-bn-relu-conv-bn plus the shortcut (a strided 1x1 conv when the shape changes), relu."""

    def __init__(self, cin: int, cout: int, stride: int = 1):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
            nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout),
        )
        self.shortcut = nn.Identity()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        return torch.relu(self.body(x) + self.shortcut(x))


class TinyResNet(nn.Module):
    def __init__(self, classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16),
                                  nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1))
        self.blocks = nn.Sequential(BasicBlock(16, 16), BasicBlock(16, 32, stride=2))
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, classes))

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)))


model = TinyResNet().eval()
with torch.no_grad():  # batch-norm statistics of a trained-looking model
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.2, 0.2)
            m.running_var.uniform_(0.5, 1.5)

example_inputs = (torch.randn(2, 3, 32, 32),)
