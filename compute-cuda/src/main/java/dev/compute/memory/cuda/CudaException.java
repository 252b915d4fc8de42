package dev.compute.memory.cuda;

import dev.compute.memory.ComputeMemoryException;

/** A CUDA driver call failed; the message names the call and the {@code CUresult}. */
public class CudaException extends ComputeMemoryException {
    private final String call;
    private final int result;

    public CudaException(String call, int result, String message) {
        super(message);
        this.call = call;
        this.result = result;
    }

    /** The driver call that failed, with what it was asked where that helps: {@code cuMemHostAlloc(16777216 bytes)}. */
    public String call() {
        return call;
    }

    /** The {@code CUresult} code. */
    public int result() {
        return result;
    }
}
