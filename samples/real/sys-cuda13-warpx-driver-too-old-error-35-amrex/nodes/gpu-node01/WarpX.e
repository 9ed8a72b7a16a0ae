amrex::Abort::0::CUDA error 35 in file /tmp/warp/WarpX/build/_deps/fetchedamrex-src/Src/Base/AMReX_GpuDevice.cpp line 189: CUDA driver version is insufficient for CUDA runtime version !!!
