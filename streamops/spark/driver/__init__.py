"""The Spark driver of an app: the parts of the running driver process (live resize, warm
standby, executor warm-up, state placement), moved here from ``spark/`` so that the driver is one
package; the entry point and the runtime itself follow.

Import submodules directly; this package imports nothing.
"""
