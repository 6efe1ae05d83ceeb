"""The recorder: admission records on stored objects become Warning Events, then go.

``wiring`` registers it with kopf (registration only); ``recorder`` posts the Events and
removes the records it posted.
"""
