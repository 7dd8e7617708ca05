"""TensorFlow's MultiWorkerMirroredStrategy (tf_keras fit), the second peer
for mirrored's training throughput: the same models as
worker/model/model_zoo.cc (mlp, cnn), per-replica batch, Adam 1e-3, one
worker process per replica on 127.0.0.1 (free ports, TF_CONFIG), intra- and
inter-op threads set. Keras 3's fit fails under MWMS, hence tf_keras.

  python tf_train.py --workers 2 --model cnn --steps 200 --warmup 40 --threads 1

With --workers N it starts N copies of itself (each with its TF_CONFIG) and
prints worker 0's `samples_per_sec <x>`, measured from the end of step
--warmup to the end of the last step. `--info` prints the TensorFlow build.
"""
import argparse
import gzip
import json
import os
import socket
import struct
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def read_idx(path):
    import numpy as np
    with gzip.open(path, "rb") as f:
        data = f.read()
    rank = struct.unpack(">I", data[:4])[0] & 0xFF
    dims = struct.unpack(">" + "I" * rank, data[4:4 + 4 * rank])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * rank).reshape(dims)


def make(keras, name):
    L = keras.layers
    if name == "mlp":
        layers = [L.Flatten(), L.Dense(256, activation="relu"), L.Dense(256, activation="relu"), L.Dense(10)]
    elif name == "cnn":
        layers = [L.Conv2D(32, 3, activation="relu"), L.MaxPooling2D(2), L.Conv2D(64, 3, activation="relu"),
                  L.MaxPooling2D(2), L.Flatten(), L.Dense(128, activation="relu"), L.Dense(10)]
    else:
        raise SystemExit("unknown model " + name)
    return keras.Sequential([keras.Input((28, 28, 1))] + layers)


def info():
    import tensorflow as tf
    from tensorflow.python.framework import test_util
    onednn = test_util.IsMklEnabled()
    kernels = "oneDNN ops on (its bundled oneDNN for MatMul, Conv2D)" if onednn else "oneDNN ops off (Eigen)"
    print("tensorflow %s, %s" % (tf.__version__, kernels))


def worker(a):
    import numpy as np
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(a.threads)
    tf.config.threading.set_inter_op_parallelism_threads(a.threads)
    import tf_keras as keras
    strategy = tf.distribute.MultiWorkerMirroredStrategy(
        communication_options=tf.distribute.experimental.CommunicationOptions(
            implementation=tf.distribute.experimental.CommunicationImplementation.RING))
    x = (read_idx(a.data + "/train-images-idx3-ubyte.gz").astype(np.float32) / 255.0)[..., None]
    y = read_idx(a.data + "/train-labels-idx1-ubyte.gz").astype(np.int64)
    global_batch = a.batch_per_replica * strategy.num_replicas_in_sync
    ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(x.shape[0], seed=1).repeat()
    ds = ds.batch(global_batch, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
    with strategy.scope():
        tf.random.set_seed(1)
        model = make(keras, a.model)
        model.compile(optimizer=keras.optimizers.Adam(1e-3),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      steps_per_execution=a.steps_per_execution)
    marks = {}

    class Clock(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if batch + 1 in (a.warmup, a.steps):  # fit calls this every --steps-per-execution
                marks[batch + 1] = time.perf_counter()

    model.fit(ds, epochs=1, steps_per_epoch=a.steps, callbacks=[Clock()], verbose=0)
    if json.loads(os.environ["TF_CONFIG"])["task"]["index"] == 0:
        sps = (a.steps - a.warmup) * global_batch / (marks[a.steps] - marks[a.warmup])
        print("samples_per_sec %.1f" % sps, flush=True)


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def launch(a, argv):
    """Runs the workers; a try whose worker 0 prints nothing (a gRPC
    connection lost under load) is run again, up to 3 tries."""
    for _ in range(3):
        hosts = ["127.0.0.1:%d" % p for p in free_ports(a.workers)]
        procs = []
        for i in range(a.workers):
            env = dict(os.environ, TF_CONFIG=json.dumps({"cluster": {"worker": hosts},
                                                         "task": {"type": "worker", "index": i}}))
            procs.append(subprocess.Popen([sys.executable, __file__, "--worker"] + argv, env=env,
                                          stdout=subprocess.PIPE, text=True))
        outs = [p.communicate()[0] for p in procs]
        if "samples_per_sec" in outs[0]:
            print(outs[0], end="", flush=True)
            return 0
    return 1


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--model", default="mlp")
    p.add_argument("--batch-per-replica", type=int, default=64)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--warmup", type=int, default=40)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps-per-execution", type=int, default=1,
                   help="steps in one tf.function call (fit's option); must divide --warmup and --steps")
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--info", action="store_true")
    a = p.parse_args()
    if a.info:
        return info()
    if a.worker:
        return worker(a)
    return launch(a, sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
