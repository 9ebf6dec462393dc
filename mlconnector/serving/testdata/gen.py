#!/usr/bin/python3
"""Writes the model server's test fixtures (run from anywhere; rewrites this folder).

Needs Debian's python3-sklearn, python3-onnx, python3-numpy and python3-xgboost. Every model is
trained here on a small scikit-learn dataset, written in a serving format by
this script, and its reference predictions come from scikit-learn itself, so
the Go side is checked against an independent implementation:

  iris_mlp.onnx        StandardScaler + MLPClassifier (4 FP32 features, 3 classes):
                       outputs "label" (INT64 [N]) and "probabilities" (FP32 [N,3]).
  diabetes_linear.onnx Ridge regression in FP64 with two inputs, "clinical" [N,4]
                       and "serum" [N,6], concatenated: output "predict" (FP64 [N,1]).
  iris_gbm.txt         GradientBoostingClassifier (3 classes, softmax) written in
                       LightGBM's text model format.
  cancer_gbm.txt       GradientBoostingClassifier (binary, 30 features) as LightGBM.
  diabetes_gbm.txt     GradientBoostingRegressor (10 features) as LightGBM.
  iris_xgb.json        XGBoost (python3-xgboost) multi:softprob, saved as XGBoost JSON;
  cancer_xgb.json      binary:logistic; references from XGBoost's own predictions
  diabetes_xgb.json    reg:squarederror  (XGBoost computes in float32).

Per dataset: DATASET.train.csv (feature columns in model order, then "target"),
shared by the models trained on it; per model: NAME.reference.json (inputs, the
expected outputs and "training_data", the CSV's name), and for the models
explained in tests NAME.shap.json (exact interventional Shapley values by brute
force over every coalition, against the first rows of the training CSV).

Feature values are rounded to float32 so that FP32 and FP64 clients send the
same numbers and scikit-learn's trees (which compare in float32) and LightGBM's
(which compare in float64) split the same way.
"""

import itertools
import json
import math
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from sklearn.datasets import load_breast_cancer, load_diabetes, load_iris
from sklearn.ensemble import GradientBoostingClassifier, GradientBoostingRegressor
from sklearn.linear_model import Ridge
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
import xgboost

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = 7
SHAP_BACKGROUND = 16


def f32(x):
    return np.asarray(x, dtype=np.float32).astype(np.float64)


def split(X, y, n_test):
    return train_test_split(f32(X), y, test_size=n_test, random_state=SEED)


def write_csv(dataset, features, X, y):
    """Writes DATASET.train.csv; the models trained on the same split share it."""
    with open(os.path.join(HERE, dataset + ".train.csv"), "w") as f:
        f.write(",".join(features + ["target"]) + "\n")
        for row, t in zip(X, y):
            f.write(",".join(repr(float(v)) for v in row) + "," + repr(float(t)) + "\n")


def write_json(name, doc):
    with open(os.path.join(HERE, name), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


def tolist(a):
    return np.asarray(a).tolist()


# --- ONNX -------------------------------------------------------------------

def save_onnx(graph, name):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                              producer_name="mlsysops-testdata")
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(HERE, name))


def iris_mlp():
    X, y = load_iris(return_X_y=True)
    features = ["sepal_length", "sepal_width", "petal_length", "petal_width"]
    Xtr, Xte, ytr, yte = split(X, y, 12)
    pipe = make_pipeline(StandardScaler(),
                         MLPClassifier(hidden_layer_sizes=(8,), activation="relu",
                                       max_iter=3000, random_state=SEED))
    pipe.fit(Xtr, ytr)
    scaler, mlp = pipe.steps[0][1], pipe.steps[1][1]

    def const(name, a):
        return numpy_helper.from_array(np.asarray(a, dtype=np.float32), name)

    nodes = [
        helper.make_node("Sub", ["input", "mean"], ["centered"]),
        helper.make_node("Div", ["centered", "scale"], ["scaled"]),
        helper.make_node("MatMul", ["scaled", "w1"], ["h1"]),
        helper.make_node("Add", ["h1", "b1"], ["h1b"]),
        helper.make_node("Relu", ["h1b"], ["a1"]),
        helper.make_node("MatMul", ["a1", "w2"], ["h2"]),
        helper.make_node("Add", ["h2", "b2"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["probabilities"], axis=1),
        helper.make_node("ArgMax", ["probabilities"], ["label"], axis=1, keepdims=0),
    ]
    graph = helper.make_graph(
        nodes, "iris_mlp",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("label", TensorProto.INT64, ["N"]),
         helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["N", 3])],
        [const("mean", scaler.mean_), const("scale", scaler.scale_),
         const("w1", mlp.coefs_[0]), const("b1", mlp.intercepts_[0]),
         const("w2", mlp.coefs_[1]), const("b2", mlp.intercepts_[1])])
    save_onnx(graph, "iris_mlp.onnx")
    write_csv("iris", features, Xtr, ytr)
    write_json("iris_mlp.reference.json", {
        "training_data": "iris.train.csv",
        "features": features,
        "inputs": {"input": tolist(Xte)},
        "outputs": {"label": tolist(pipe.predict(Xte)),
                    "probabilities": tolist(pipe.predict_proba(Xte))},
    })


def diabetes_linear():
    X, y = load_diabetes(return_X_y=True)
    features = ["age", "sex", "bmi", "bp", "s1", "s2", "s3", "s4", "s5", "s6"]
    Xtr, Xte, ytr, yte = split(X, y, 12)
    ridge = Ridge(alpha=0.5).fit(Xtr, ytr)
    nodes = [
        helper.make_node("Concat", ["clinical", "serum"], ["x"], axis=1),
        helper.make_node("MatMul", ["x", "coef"], ["xw"]),
        helper.make_node("Add", ["xw", "intercept"], ["predict"]),
    ]
    graph = helper.make_graph(
        nodes, "diabetes_linear",
        [helper.make_tensor_value_info("clinical", TensorProto.DOUBLE, ["N", 4]),
         helper.make_tensor_value_info("serum", TensorProto.DOUBLE, ["N", 6])],
        [helper.make_tensor_value_info("predict", TensorProto.DOUBLE, ["N", 1])],
        [numpy_helper.from_array(ridge.coef_.reshape(10, 1).astype(np.float64), "coef"),
         numpy_helper.from_array(np.array([ridge.intercept_], dtype=np.float64), "intercept")])
    save_onnx(graph, "diabetes_linear.onnx")
    write_csv("diabetes", features, Xtr, ytr)
    write_json("diabetes_linear.reference.json", {
        "training_data": "diabetes.train.csv",
        "features": features,
        "inputs": {"clinical": tolist(Xte[:, :4]), "serum": tolist(Xte[:, 4:])},
        "outputs": {"predict": tolist(ridge.predict(Xte).reshape(-1, 1))},
        # A linear model's interventional Shapley values are known in closed
        # form: coef_i * (x_i - mean of the background's column i).
        "coef": tolist(ridge.coef_),
    })
    shap_file("diabetes_linear", lambda A: ridge.predict(A).reshape(-1, 1), Xtr, Xte[0])


# --- LightGBM text format ----------------------------------------------------

def lgb_tree(index, tree, scale, bias):
    """One scikit-learn regression tree as a LightGBM "Tree=" block.

    LightGBM numbers internal nodes and leaves separately; a child that is a
    leaf is written as ~leaf (a negative number). Both go left on x <= t.
    """
    t = tree.tree_
    internal, leaves = {}, {}

    def walk(node):
        if t.children_left[node] == -1:
            leaves[node] = len(leaves)
            return
        internal[node] = len(internal)
        walk(t.children_left[node])
        walk(t.children_right[node])

    walk(0)
    if not internal:
        raise SystemExit("a tree with a single leaf: use more data or depth")

    def ref(node):
        return internal[node] if node in internal else ~leaves[node]

    order = sorted(internal, key=internal.get)
    leaf_order = sorted(leaves, key=leaves.get)
    lines = [
        "Tree=%d" % index,
        "num_leaves=%d" % len(leaves),
        "num_cat=0",
        "split_feature=" + " ".join(str(t.feature[n]) for n in order),
        "split_gain=" + " ".join("0" for _ in order),
        "threshold=" + " ".join(repr(float(t.threshold[n])) for n in order),
        "decision_type=" + " ".join("2" for _ in order),
        "left_child=" + " ".join(str(ref(t.children_left[n])) for n in order),
        "right_child=" + " ".join(str(ref(t.children_right[n])) for n in order),
        "leaf_value=" + " ".join(repr(float(scale * t.value[n][0][0] + bias)) for n in leaf_order),
        "leaf_count=" + " ".join(str(int(t.n_node_samples[n])) for n in leaf_order),
        "internal_value=" + " ".join("0" for _ in order),
        "internal_count=" + " ".join(str(int(t.n_node_samples[n])) for n in order),
        "shrinkage=1",
    ]
    return "\n".join(lines) + "\n\n\n"


def save_lgb(name, gbm, features, objective, n_class):
    # scikit-learn starts from a prior (the init estimator's raw prediction):
    # it is folded into the first tree of each class.
    init = gbm._raw_predict_init(np.zeros((1, len(features))))[0]
    blocks = []
    for it, stage in enumerate(gbm.estimators_):
        for k, tree in enumerate(stage):
            blocks.append(lgb_tree(len(blocks), tree, gbm.learning_rate,
                                   init[k] if it == 0 else 0.0))
    header = [
        "tree",
        "version=v3",
        "num_class=%d" % n_class,
        "num_tree_per_iteration=%d" % n_class,
        "label_index=0",
        "max_feature_idx=%d" % (len(features) - 1),
        "objective=" + objective,
        "feature_names=" + " ".join(features),
        "feature_infos=" + " ".join("none" for _ in features),
        "tree_sizes=" + " ".join(str(len(b)) for b in blocks),
    ]
    with open(os.path.join(HERE, name), "w") as f:
        f.write("\n".join(header) + "\n\n")
        f.write("".join(blocks))
        f.write("end of trees\n")


IRIS = ["sepal_length", "sepal_width", "petal_length", "petal_width"]
DIABETES = ["age", "sex", "bmi", "bp", "s1", "s2", "s3", "s4", "s5", "s6"]


def cancer_features(data):
    return [n.replace(" ", "_") for n in data.feature_names]


def gbm_classifier(name, dataset, X, y, features, n_test, n_estimators, max_depth, objective, n_class):
    Xtr, Xte, ytr, yte = split(X, y, n_test)
    gbm = GradientBoostingClassifier(n_estimators=n_estimators, max_depth=max_depth, random_state=SEED).fit(Xtr, ytr)
    save_lgb(name + ".txt", gbm, features, objective, n_class)
    write_csv(dataset, features, Xtr, ytr)
    write_json(name + ".reference.json", {
        "training_data": dataset + ".train.csv",
        "features": features,
        "inputs": {"input": tolist(Xte)},
        "outputs": {"label": tolist(gbm.predict(Xte)), "probabilities": tolist(gbm.predict_proba(Xte))},
    })


def iris_gbm():
    X, y = load_iris(return_X_y=True)
    gbm_classifier("iris_gbm", "iris", X, y, IRIS, 12, 10, 2, "multiclass num_class:3", 3)


def cancer_gbm():
    data = load_breast_cancer()
    gbm_classifier("cancer_gbm", "cancer", data.data, data.target, cancer_features(data), 16, 20, 3, "binary sigmoid:1", 1)


def diabetes_gbm():
    X, y = load_diabetes(return_X_y=True)
    features = ["age", "sex", "bmi", "bp", "s1", "s2", "s3", "s4", "s5", "s6"]
    Xtr, Xte, ytr, yte = split(X, y, 12)
    gbm = GradientBoostingRegressor(n_estimators=30, max_depth=3, random_state=SEED).fit(Xtr, ytr)
    save_lgb("diabetes_gbm.txt", gbm, features, "regression", 1)
    write_csv("diabetes", features, Xtr, ytr)
    write_json("diabetes_gbm.reference.json", {
        "training_data": "diabetes.train.csv",
        "features": features,
        "inputs": {"input": tolist(Xte)},
        "outputs": {"predict": tolist(gbm.predict(Xte).reshape(-1, 1))},
    })
    shap_file("diabetes_gbm", lambda A: gbm.predict(A).reshape(-1, 1), Xtr, Xte[0])


# --- XGBoost JSON ---------------------------------------------------------------

def xgb_model(name, dataset, X, y, features, n_test, objective, classifier):
    Xtr, Xte, ytr, yte = split(X, y, n_test)
    cls = xgboost.XGBClassifier if classifier else xgboost.XGBRegressor
    m = cls(n_estimators=12, max_depth=3, learning_rate=0.3, objective=objective,
            random_state=SEED, tree_method="exact")
    m.fit(Xtr, ytr)
    m.get_booster().feature_names = features
    m.get_booster().save_model(os.path.join(HERE, name + ".json"))
    write_csv(dataset, features, Xtr, ytr)
    outputs = {"predict": tolist(m.predict(Xte).reshape(-1, 1))}
    if classifier:
        outputs = {"label": tolist(m.predict(Xte)), "probabilities": tolist(m.predict_proba(Xte))}
    write_json(name + ".reference.json", {"training_data": dataset + ".train.csv", "features": features, "inputs": {"input": tolist(Xte)}, "outputs": outputs})


def xgb_models():
    iris = load_iris()
    xgb_model("iris_xgb", "iris", iris.data, iris.target,
              IRIS, 12, "multi:softprob", True)
    cancer = load_breast_cancer()
    xgb_model("cancer_xgb", "cancer", cancer.data, cancer.target,
              cancer_features(cancer), 16, "binary:logistic", True)
    diabetes = load_diabetes()
    xgb_model("diabetes_xgb", "diabetes", diabetes.data, diabetes.target,
              DIABETES, 12, "reg:squarederror", False)


# --- Shapley values by brute force -------------------------------------------

def shap_file(name, predict, background, x):
    """Exact interventional Shapley values of predict at x.

    v(S) is the mean prediction over the background rows with the features
    in S taken from x; phi_i sums |S|!(M-|S|-1)!/M! (v(S+i) - v(S)) over
    every coalition S without i.
    """
    bg = background[:SHAP_BACKGROUND]
    m = len(x)
    v = {}
    for size in range(m + 1):
        for s in itertools.combinations(range(m), size):
            rows = bg.copy()
            rows[:, list(s)] = x[list(s)]
            v[frozenset(s)] = predict(rows).mean(axis=0)
    phi = np.zeros((m, len(v[frozenset()])))
    for i in range(m):
        others = [j for j in range(m) if j != i]
        for size in range(m):
            w = math.factorial(size) * math.factorial(m - size - 1) / math.factorial(m)
            for s in itertools.combinations(others, size):
                phi[i] += w * (v[frozenset(s) | {i}] - v[frozenset(s)])
    write_json(name + ".shap.json", {
        "background_rows": SHAP_BACKGROUND,
        "x": tolist(x),
        "base_value": tolist(v[frozenset()]),
        "prediction": tolist(v[frozenset(range(m))]),
        "shapley_values": tolist(phi),
    })


if __name__ == "__main__":
    iris_mlp()
    diabetes_linear()
    iris_gbm()
    cancer_gbm()
    diabetes_gbm()
    xgb_models()
