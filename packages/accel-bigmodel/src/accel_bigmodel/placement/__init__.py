"""Where weights go: the devices of this machine, byte sizes of modules, memory budgets per device,
the device-map planner and the placement of single tensors. Imports no other folder of the
package.
"""
