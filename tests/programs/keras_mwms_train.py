"""The multi-worker Keras tutorial's model, trained with
MultiWorkerMirroredStrategy on a slice of Fashion-MNIST: the program a user
hands to `mirrored-launch local --workers 2 --evaluator -- python3 THIS.py`.

Each task reads its role from TF_CONFIG (the launcher sets it):
  worker  trains; BackupAndRestore lets a restarted job resume from the last
          finished epoch, and the chief (worker 0) saves a checkpoint per
          epoch for the evaluator.
  evaluator  runs SidecarEvaluator over the chief's checkpoints and exits
          after the last epoch's.

TensorFlow 2.16+ ships Keras 3, whose fit() fails under this strategy, so
the program uses tf_keras (Keras 2) with TF_USE_LEGACY_KERAS=1.
"""
import argparse
import gzip
import json
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # before TensorFlow is imported
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras as keras  # noqa: E402


def parse_flags():
    run_dir = os.environ.get("MIRRORED_RUN_DIR", ".")
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist", help="Fashion-MNIST IDX .gz files")
    p.add_argument("--train-examples", type=int, default=4096, help="first N training images")
    p.add_argument("--eval-examples", type=int, default=1000, help="first N test images (evaluator)")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--steps-per-epoch", type=int, default=20)
    p.add_argument("--batch-per-worker", type=int, default=64)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--backup-dir", default=os.path.join(run_dir, "keras", "backup"),
                   help="BackupAndRestore's directory (default: $MIRRORED_RUN_DIR/keras/backup)")
    p.add_argument("--checkpoint-dir", default=os.path.join(run_dir, "keras", "checkpoints"),
                   help="the chief's per-epoch checkpoints, read by the evaluator")
    flags = p.parse_args()
    for name in ("epochs", "steps_per_epoch", "batch_per_worker", "train_examples", "eval_examples"):
        if getattr(flags, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    return flags


def read_idx(data_dir, split, count):
    """(images as float32 rows of 784 in [0, 1], labels) of the first `count`."""
    with gzip.open(os.path.join(data_dir, f"{split}-images-idx3-ubyte.gz")) as f:
        images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 784)[:count]
    with gzip.open(os.path.join(data_dir, f"{split}-labels-idx1-ubyte.gz")) as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8)[:count]
    return images.astype("float32") / 255, labels.astype("int64")


def dataset(images, labels, batch_size):
    ds = tf.data.Dataset.from_tensor_slices((images, labels)).repeat().batch(batch_size)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return ds.with_options(options)


def build_model():
    """The tutorial's 2-layer densely-connected network."""
    inputs = keras.Input(shape=(784,))
    x = keras.layers.Dense(256, activation="relu")(inputs)
    x = keras.layers.Dense(256, activation="relu")(x)
    model = keras.Model(inputs, keras.layers.Dense(10)(x))
    model.compile(optimizer=keras.optimizers.Adam(),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    return model


class EpochLog(keras.callbacks.Callback):
    """One line per epoch, and where training (re)started."""

    def __init__(self, epochs, backup_dir):
        super().__init__()
        self.epochs, self.backup_dir = epochs, backup_dir
        self.first, self.stepped = None, False

    def on_epoch_begin(self, epoch, logs=None):
        if self.first is None:
            self.first = epoch
            if epoch > 0:
                print(f"resuming at epoch {epoch + 1}/{self.epochs}: epochs 1-{epoch} restored from "
                      f"{self.backup_dir}", flush=True)

    def on_train_batch_end(self, batch, logs=None):
        if not self.stepped:
            self.stepped = True
            print("first step done", flush=True)

    def on_epoch_end(self, epoch, logs=None):
        print(f"epoch {epoch + 1}/{self.epochs}: loss {logs['loss']:.6f} accuracy {logs['accuracy']:.4f}",
              flush=True)


def train(flags, task_index):
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    workers = strategy.num_replicas_in_sync
    images, labels = read_idx(flags.data, "train", flags.train_examples)
    with strategy.scope():
        model = build_model()
    callbacks = [
        keras.callbacks.BackupAndRestore(backup_dir=flags.backup_dir),
        # Every worker runs it; only the chief's files are kept (TF's rule).
        keras.callbacks.ModelCheckpoint(os.path.join(flags.checkpoint_dir, "ckpt-{epoch}"), save_weights_only=True),
        EpochLog(flags.epochs, flags.backup_dir),
    ]
    print(f"worker {task_index}: {workers} workers, global batch {flags.batch_per_worker * workers}", flush=True)
    model.fit(dataset(images, labels, flags.batch_per_worker * workers), epochs=flags.epochs,
              steps_per_epoch=flags.steps_per_epoch, callbacks=callbacks, verbose=0)
    print(f"worker {task_index}: done", flush=True)


class EvaluationLog(keras.callbacks.Callback):
    def __init__(self, steps_per_epoch):
        super().__init__()
        self.steps_per_epoch = steps_per_epoch

    def on_test_end(self, logs=None):
        step = int(self.model.optimizer.iterations.numpy())
        print(f"evaluated checkpoint of epoch {step // self.steps_per_epoch} (step {step}): "
              f"loss {logs['loss']:.6f} accuracy {logs['accuracy']:.4f}", flush=True)


def evaluate(flags):
    images, labels = read_idx(flags.data, "t10k", flags.eval_examples)
    model = build_model()
    model.optimizer.build(model.trainable_variables)  # its slots too, so the whole checkpoint restores
    evaluator = keras.utils.SidecarEvaluator(
        model, tf.data.Dataset.from_tensor_slices((images, labels)).batch(256),
        checkpoint_dir=flags.checkpoint_dir, max_evaluations=flags.epochs,
        callbacks=[EvaluationLog(flags.steps_per_epoch)])
    print(f"evaluator: following {flags.checkpoint_dir} up to ckpt-{flags.epochs}", flush=True)
    evaluator.start()  # returns after it has evaluated ckpt-<epochs>
    print("evaluator: done", flush=True)


def main():
    flags = parse_flags()
    keras.utils.set_random_seed(flags.seed)
    task = json.loads(os.environ.get("TF_CONFIG", "{}")).get("task", {})
    if task.get("type") == "evaluator":
        evaluate(flags)
    else:
        train(flags, task.get("index", 0))


if __name__ == "__main__":
    main()
