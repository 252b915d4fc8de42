package dev.compute.memory;

/**
 * A kernel did not compile: OpenCL's {@code clBuildProgram} failed, the CUDA driver refused the PTX, or the source
 * has no kernel of the name given. The message names the kernel and the device and carries the compiler's log,
 * which {@link #buildLog()} also gives.
 */
public class KernelCompileException extends ComputeMemoryException {

    private final String buildLog;

    public KernelCompileException(String message, String buildLog) {
        super(buildLog.isBlank() ? message : message + "\n" + buildLog);
        this.buildLog = buildLog;
    }

    /** What the compiler said (OpenCL's build log, the CUDA JIT's error log); empty where it said nothing. */
    public String buildLog() {
        return buildLog;
    }
}
