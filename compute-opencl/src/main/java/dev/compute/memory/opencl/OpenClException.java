package dev.compute.memory.opencl;

import dev.compute.memory.ComputeMemoryException;
import org.jocl.CL;

/** An OpenCL call failed for a reason other than a lack of memory; carries the error code and its name. */
public class OpenClException extends ComputeMemoryException {
    private final int errorCode;

    public OpenClException(String what, int errorCode) {
        super(what + " failed: " + CL.stringFor_errorCode(errorCode) + " (" + errorCode + ")");
        this.errorCode = errorCode;
    }

    public OpenClException(String message) {
        super(message);
        this.errorCode = 0;
    }

    /** The OpenCL error code ({@code CL_INVALID_VALUE} is -30); 0 when the failure was not a call's. */
    public int errorCode() {
        return errorCode;
    }
}
