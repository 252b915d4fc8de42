package dev.compute.memory.cuda;

import jcuda.driver.CUcontext;

/** A JCuda {@code CUcontext} whose raw handle can be compared with what {@code cuCtxGetCurrent} returns through FFM. */
final class ContextHandle extends CUcontext {
    long handle() {
        return getNativePointer();
    }
}
