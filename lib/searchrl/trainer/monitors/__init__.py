"""What watches an RL stage without changing it: training health (alarms, stop, roll back), the fixed probe set's
learning curve, and the mechanisms that never acted; transformers callbacks and the readers of their records."""
