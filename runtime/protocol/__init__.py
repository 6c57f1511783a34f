"""The job protocol: what a client publishes, what the scheduler answers, and each job type's parameters.

It sits below everything else: the kernels read their ``params`` models from here, the runtime validates
requests and builds results with it, validation and the CLI speak it. It imports nothing of the project's.
"""
