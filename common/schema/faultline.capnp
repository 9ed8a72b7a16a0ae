@0xc5f2a3d19b7e4a61;
# placeholder, replaced by the schema commit
struct Placeholder { x @0 :UInt8; }
